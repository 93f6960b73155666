// SPDX-License-Identifier: Apache-2.0

// The parent handle: start and stop the stack thread, run forward requests
// on it, publish the opaque pairs.
#include "parent/parent.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <slirp/libslirp.h>

#include <future>
#include <optional>
#include <system_error>

#include "common/error.hpp"
#include "handover/child_setup.hpp"
#include "handover/server.hpp"
#include "common/no_throw.hpp"
#include "common/thread_signals.hpp"
#include "parent/sandbox.hpp"
#include "slirp/adapter.hpp"
#include "parent/stack_loop.hpp"

namespace rknp {

namespace {

// How long the parent waits for the Hello of a peer it greeted; the child
// sends it at once.
constexpr int kHelloTimeoutMs = 2000;

std::unique_ptr<LogQueue> log_queue_for(const Logger &l) {
    if (l.fn() == nullptr) return nullptr;
    return std::make_unique<LogQueue>(l.fn(), l.user());
}

// The guest's IPv6 network a forward's IPv6 guest_addr is checked
// against: pasta's model's, or libslirp's fd00::/64; none without IPv6.
std::optional<GuestNet6> guest_net6(const ParentConfig &cfg) {
    if (!cfg.ipv6) return std::nullopt;
    GuestNet6 n;
    if (cfg.ipv6_host) {
        n.prefix = cfg.ipv6_host->prefix;
        n.gateway = cfg.ipv6_host->gateway;
        n.dns = cfg.ipv6_host->dns;
        return n;
    }
    n.prefix = Ipv6Prefix{parse_ipv6("ipv6 prefix", kIpv6Prefix), kIpv6PrefixLen};
    n.gateway = parse_ipv6("ipv6 gateway", kIpv6Gateway);
    if (!cfg.disable_dns) n.dns = parse_ipv6("ipv6 dns", kIpv6Dns);
    return n;
}

} // namespace

Parent::Parent(ParentConfig cfg, std::function<void()> before_stack_thread)
    : logs_(log_queue_for(cfg.logger)), cfg_(std::move(cfg)),
      stack_cfg_(cfg_), before_stack_thread_(std::move(before_stack_thread)),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (!wake_) throw_errno("eventfd");
    if (logs_) {
        cfg_.logger = Logger::through(*logs_);
        stack_cfg_.logger = Logger::queued(*logs_);
    }
}

Parent::~Parent() { close(); }

void Parent::start(const std::string &state_dir, pid_t child_pid) {
    // A failed start stops the logger thread, which a callback cannot wait
    // for (it may run on it); and nothing needs a parent started there.
    if (LogQueue::in_callback())
        throw Error(RKNP_ERR_STATE,
                    "rknp_parent_start called from the log callback: not "
                    "allowed there; call it from outside the callback");
    Lines lines;
    {
        std::lock_guard lock(mu_);
        lines = start_locked(state_dir, child_pid);
    }
    // Once mu_ is released, so that the callback may call back in.
    for (const auto &[level, text] : lines) cfg_.logger.log(level, text);
}

Parent::Lines Parent::start_locked(const std::string &state_dir,
                                   pid_t child_pid) {
    if (state_ != State::Created)
        throw Error(RKNP_ERR_STATE, state_ == State::Running
                                        ? "parent already started"
                                        : "parent is closed");
    // Closed from a log callback before it was ever started.
    if (stop_.load()) throw Error(RKNP_ERR_STATE, "parent is closed");
    if (child_pid <= 0)
        throw_invalid("invalid child_pid \"" + std::to_string(child_pid) +
                      "\": must be a process id");
    if (state_dir.empty() || state_dir[0] != '/')
        throw_invalid("invalid state_dir \"" + state_dir +
                      "\": must be an absolute path");
    // Guest flows hold host fds: a quarter of the fd limit (as it is now:
    // Go raises the soft limit to the hard one at start) stays free for
    // rootlesskit's API socket, port driver and children.
    rlimit nofile{};
    uint64_t soft = 0;
    if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY)
        soft = nofile.rlim_cur;
    const uint32_t configured = cfg_.max_flows;
    const uint32_t effective = effective_max_flows(configured, soft);
    std::string path = state_dir + "/rknp.sock";
    handover::Tokens tokens = handover::random_tokens();
    // What can fail without side effects comes first: past the socket's
    // creation, only launching the stack thread may.
    KeyValues opaque = ChildSetup::make(cfg_, path, tokens).encode();
    Lines lines;
    lines.emplace_back(
        RKNP_LOG_INFO,
        "guest flows: at most " + std::to_string(effective) +
            " host sockets (configured " + std::to_string(configured) +
            ", RLIMIT_NOFILE " +
            (soft != 0 ? std::to_string(soft) : std::string("unlimited")) + "), " +
            std::to_string(cfg_.max_new_flows_per_sec) + " new flows per second");
    lines.emplace_back(RKNP_LOG_INFO, std::string("stack started (libslirp ") +
                                          slirp_version_string() +
                                          "), waiting for the tap on " + path);
    if (std::string w = libslirp_bug_warning(slirp_version_string()); !w.empty())
        lines.emplace_back(RKNP_LOG_WARN, std::move(w));

    // The stack thread's records reach the callback from this thread.
    if (logs_) logs_->start();
    bool socket_created = false;
    try {
        handover::Server server(handover::listen_socket(state_dir, "rknp.sock"),
                                child_pid, ::geteuid(), tokens, kHelloTimeoutMs);
        socket_created = true;
        cfg_.max_flows = effective;
        stack_cfg_.max_flows = effective;
        launch_stack_thread(std::move(server));
    } catch (...) {
        // A failed start leaves the handle as it found it: no socket file
        // (a retry or the child must not find a dead one), no logger
        // thread, the configuration and counters as before. The stack
        // thread, if it ran, is joined already.
        if (socket_created) ::unlink(path.c_str());
        cfg_.max_flows = configured;
        stack_cfg_.max_flows = configured;
        stats_.tcp_peek_mode.store(0);
        stats_.sandbox.store(0);
        if (logs_) logs_->stop(); // what the stack thread said before failing
        throw;
    }
    socket_path_ = std::move(path);
    opaque_ = std::move(opaque);
    state_ = State::Running;
    started_.store(true);
    return lines;
}

void Parent::launch_stack_thread(handover::Server server) {
    // The stack thread's error comes back as plain data (ErrorRecord).
    std::promise<std::optional<ErrorRecord>> ready;
    auto ready_future = ready.get_future();
    try {
        if (before_stack_thread_) before_stack_thread_();
        // libslirp is created, run and destroyed on the stack thread only.
        thread_ = std::thread([this, server = std::move(server),
                               ready = std::move(ready)]() mutable {
            // Before anything else: libslirp writes to host sockets without
            // MSG_NOSIGNAL (SIGPIPE becomes EPIPE), and the caller's signals
            // belong to its own threads.
            block_all_signals();
            // This thread logs through logs_ only: it never runs the caller's
            // callback (Go code, in rootlesskit), whatever it logs.
            std::unique_ptr<StackLoop> loop;
            try {
                loop = std::make_unique<StackLoop>(stack_cfg_, std::move(server),
                                                   wake_.get(), stop_, stats_,
                                                   tasks_);
            } catch (...) {
                ready.set_value(current_error());
                return;
            }
            // Everything this thread opens at start is open: from here on it
            // runs confined (no new files, no exec; docs/security.md, "The
            // stack thread's sandbox").
            if (stack_cfg_.sandbox)
                stats_.sandbox.store(confine_stack_thread(stack_cfg_.logger));
            else
                stack_cfg_.logger.info("sandbox on the stack thread: off "
                                       "(disable_sandbox)");
            ready.set_value(std::nullopt);
            // Nothing may leave this thread: an exception here would end
            // rootlesskit (std::terminate) and every container with it. One
            // that stops the loop stops the parent as close() would.
            if (!run_catching_all(stack_cfg_.logger,
                                  "stack thread stopped, the network is down",
                                  [&] { loop->run(); }))
                stop_.store(true);
            run_catching_all(stack_cfg_.logger, "stack thread teardown", [&] {
                loop.reset(); // libslirp and its sockets go with this thread
                stats_.tap_attached.store(false);
                // Requests that raced with the stop learn that the stack is gone.
                for (auto &task : tasks_.close()) task(nullptr);
            });
        });
    } catch (const std::system_error &e) {
        // No thread: the lambda, and the server's listening socket with it,
        // are gone already.
        throw Error(RKNP_ERR_SYSTEM,
                    std::string("starting the stack thread: ") + e.what());
    }
    if (std::optional<ErrorRecord> failed = ready_future.get()) {
        thread_.join();
        throw Error(failed->code, failed->message);
    }
}

void Parent::request_stop() noexcept {
    stop_.store(true);
    uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
}

void Parent::close() noexcept {
    if (LogQueue::in_callback()) {
        // From inside the log callback (on the logger thread, or holding
        // the queue's delivery lock): joining would deadlock. Ask the loop
        // to stop; a later close() from another thread joins. Touches
        // only stop_ and wake_, never mu_ or thread_: the thread running
        // the callback may hold mu_ (close's own delivery below), and
        // start may be writing thread_ on another thread.
        request_stop();
        return;
    }
    std::lock_guard lock(mu_);
    if (state_ == State::Closed) return;
    if (state_ == State::Running) {
        request_stop();
        if (thread_.joinable()) thread_.join();
        stats_.sandbox.store(0);
        ::unlink(socket_path_.c_str());
        stats_.tap_attached.store(false);
        // libslirp and its listening sockets are gone with the thread.
        std::lock_guard fwd_lock(fwd_mu_);
        fwds_.clear();
    }
    // Every record the stack thread queued reaches the callback first.
    // With mu_ held: a second close() waits for this delivery too, and no
    // call allowed from the callback takes mu_ (start is refused there,
    // close does not wait), so the callback cannot deadlock on it.
    if (logs_) logs_->stop();
    state_ = State::Closed;
}

void Parent::refuse_free() noexcept {
    request_stop();
    // Once per handle: a callback that frees on every error line would
    // otherwise recurse without end on this very line.
    if (!free_refusal_logged_.exchange(true))
        cfg_.logger.error("rknp_parent_free called from the log callback: not "
                          "freed (the parent was asked to stop, as "
                          "rknp_parent_close from there does); call "
                          "rknp_parent_free again from outside the callback");
}

void Parent::on_stack(const std::function<void(StackLoop &)> &fn) {
    if (!started_.load() || stop_.load())
        throw Error(RKNP_ERR_STATE, "parent is not running");
    // The stack thread's error comes back as plain data (ErrorRecord).
    std::promise<std::optional<ErrorRecord>> done;
    auto result = done.get_future();
    bool queued = tasks_.post([&](StackLoop *loop) {
        try {
            if (loop == nullptr)
                throw Error(RKNP_ERR_STATE, "parent is not running");
            fn(*loop);
            done.set_value(std::nullopt);
        } catch (...) {
            done.set_value(current_error());
        }
    });
    if (!queued) throw Error(RKNP_ERR_STATE, "parent is not running");
    uint64_t one = 1; // not request_stop: wakes without stopping
    (void)!::write(wake_.get(), &one, sizeof one);
    if (std::optional<ErrorRecord> failed = result.get())
        throw Error(failed->code, failed->message);
}

uint32_t Parent::add_forward(const rknp_forward &f) {
    const std::optional<GuestNet6> net6 = guest_net6(cfg_);
    ForwardSpec spec = ForwardSpec::from_c(f, cfg_.cidr, net6 ? &*net6 : nullptr);
    uint32_t id = 0;
    const char *path = nullptr;
    {
        std::lock_guard lock(fwd_mu_);
        // Before the duplicate check: a closed parent's table is stale.
        if (!started_.load() || stop_.load())
            throw Error(RKNP_ERR_STATE, "parent is not running");
        fwds_.check_new(spec);
        on_stack([&](StackLoop &loop) { path = loop.add_forward(spec); });
        id = fwds_.insert(spec);
    }
    // Logged once fwd_mu_ is released: the callback runs on this thread and
    // may list, add or remove forwards itself (rknp.h, rknp_log_fn).
    cfg_.logger.info("forward " + std::to_string(id) + ": " + spec.host_side() +
                     " -> " + spec.guest_string() + ":" +
                     std::to_string(spec.guest_port) + " (" + path + ")");
    return id;
}

void Parent::remove_forward(uint32_t id) {
    // Logs nothing: if it ever does, after releasing fwd_mu_ (add_forward).
    std::lock_guard lock(fwd_mu_);
    if (!started_.load() || stop_.load())
        throw Error(RKNP_ERR_STATE, "parent is not running");
    ForwardSpec spec = fwds_.at(id);
    on_stack([&](StackLoop &loop) { loop.remove_forward(spec); });
    fwds_.erase(id);
}

std::map<uint32_t, ForwardSpec> Parent::forwards() const {
    std::lock_guard lock(fwd_mu_);
    // A stopping stack (closed from the log callback) forwards nothing.
    if (stop_.load()) return {};
    return fwds_.all();
}

} // namespace rknp
