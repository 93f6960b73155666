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

#include "common/error.hpp"
#include "handover/child_setup.hpp"
#include "handover/server.hpp"
#include "parent/no_throw.hpp"
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

} // namespace

Parent::Parent(ParentConfig cfg)
    : logs_(log_queue_for(cfg.logger)), cfg_(std::move(cfg)),
      stack_cfg_(cfg_) {
    if (logs_) {
        cfg_.logger = Logger::through(*logs_);
        stack_cfg_.logger = Logger::queued(*logs_);
    }
}

Parent::~Parent() { close(); }

void Parent::start(const std::string &state_dir, pid_t child_pid) {
    std::lock_guard lock(mu_);
    if (state_ != State::Created)
        throw Error(RKNP_ERR_STATE, state_ == State::Running
                                        ? "parent already started"
                                        : "parent is closed");
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
    uint32_t configured = cfg_.max_flows;
    cfg_.max_flows = effective_max_flows(configured, soft);
    stack_cfg_.max_flows = cfg_.max_flows;
    // The stack thread's records reach the callback from this thread.
    if (logs_) logs_->start();
    std::string path = state_dir + "/rknp.sock";
    handover::Tokens tokens = handover::random_tokens();
    handover::Server server(handover::listen_socket(state_dir, "rknp.sock"),
                            child_pid, ::geteuid(), tokens, kHelloTimeoutMs);
    wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_) {
        ::unlink(path.c_str());
        throw_errno("eventfd");
    }

    // libslirp is created, run and destroyed on the stack thread only.
    std::promise<void> ready;
    auto ready_future = ready.get_future();
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
            ready.set_exception(std::current_exception());
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
        ready.set_value();
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
    try {
        ready_future.get();
    } catch (...) {
        thread_.join();
        wake_.reset();
        ::unlink(path.c_str());
        if (logs_) logs_->stop(); // what the stack thread said before failing
        throw;
    }
    socket_path_ = path;
    opaque_ = ChildSetup::make(cfg_, path, tokens).encode();
    state_ = State::Running;
    started_.store(true);
    cfg_.logger.info("guest flows: at most " + std::to_string(cfg_.max_flows) +
                     " host sockets (configured " + std::to_string(configured) +
                     ", RLIMIT_NOFILE " +
                     (soft != 0 ? std::to_string(soft) : std::string("unlimited")) +
                     "), " + std::to_string(cfg_.max_new_flows_per_sec) +
                     " new flows per second");
    cfg_.logger.info(std::string("stack started (libslirp ") +
                     slirp_version_string() + "), waiting for the tap on " +
                     path);
    if (std::string w = libslirp_bug_warning(slirp_version_string()); !w.empty())
        cfg_.logger.warn(w);
}

void Parent::close() noexcept {
    if (LogQueue::in_callback() ||
        std::this_thread::get_id() == thread_.get_id()) {
        // From inside the log callback (on the logger thread, or holding
        // the queue's delivery lock): joining would deadlock. Ask the loop
        // to stop; a later close() from another thread joins.
        stop_.store(true);
        if (wake_) {
            uint64_t one = 1;
            (void)!::write(wake_.get(), &one, sizeof one);
        }
        return;
    }
    std::lock_guard lock(mu_);
    if (state_ == State::Closed) return;
    if (state_ == State::Running) {
        stop_.store(true);
        uint64_t one = 1;
        (void)!::write(wake_.get(), &one, sizeof one);
        if (thread_.joinable()) thread_.join();
        stats_.sandbox.store(0);
        // wake_ stays open until destruction: a racing on_stack may still
        // write to it.
        ::unlink(socket_path_.c_str());
        stats_.tap_attached.store(false);
        // libslirp and its listening sockets are gone with the thread.
        std::lock_guard fwd_lock(fwd_mu_);
        fwds_.clear();
    }
    // Every record the stack thread queued reaches the callback first.
    if (logs_) logs_->stop();
    state_ = State::Closed;
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
    uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
    if (std::optional<ErrorRecord> failed = result.get())
        throw Error(failed->code, failed->message);
}

uint32_t Parent::add_forward(const rknp_forward &f) {
    ForwardSpec spec = ForwardSpec::from_c(f, cfg_.cidr);
    std::lock_guard lock(fwd_mu_);
    // Before the duplicate check: a closed parent's table is stale.
    if (!started_.load() || stop_.load())
        throw Error(RKNP_ERR_STATE, "parent is not running");
    fwds_.check_new(spec);
    bool fast = false;
    on_stack([&](StackLoop &loop) { fast = loop.add_forward(spec); });
    uint32_t id = fwds_.insert(spec);
    cfg_.logger.info("forward " + std::to_string(id) + ": " + spec.host_side() +
                     " -> " + format_ipv4(spec.guest) + ":" +
                     std::to_string(spec.guest_port) +
                     (fast ? (spec.udp ? " (UDP fast path)" : " (TCP fast path)") : ""));
    return id;
}

void Parent::remove_forward(uint32_t id) {
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
