// SPDX-License-Identifier: Apache-2.0

// rknp-pasta: a pasta-compatible command on the public rknp C ABI, for
// Podman and rootlesskit's pasta driver. Order: check every option, fork
// into the background (the caller waits for its report), fork the
// hand-over child while single-threaded, enter the sandbox and load
// seccomp (as pasta always does), start the rknp parent, hand the tap
// over, bind the forwards, report ready, then serve (signals, the target,
// "auto" rescans, rknp-pesto's -c socket, -T/-U's relay) until the target
// is gone or a signal comes.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "background.hpp"
#include "cli.hpp"
#include "cmd/common/malloc_policy.hpp"
#include "cmd/common/child_process.hpp"
#include "cmd/common/control_socket.hpp"
#include "cmd/common/errors.hpp"
#include "cmd/common/monotonic.hpp"
#include "cmd/common/forward_backend.hpp"
#include "cmd/common/namespaces.hpp"
#include "cmd/common/port_spec.hpp"
#include "cmd/common/rknp_handle.hpp"
#include "cmd/common/sandbox.hpp"
#include "cmd/common/seccomp_filter.hpp"
#include "cmd/common/signals.hpp"
#include "cmd/common/state_dir.hpp"
#include "cmd/common/target_watch.hpp"
#include "loopback_handoff.hpp"
#include "loopback_relay.hpp"
#include "network_model.hpp"
#include "ns_forwarder.hpp"
#include "ns_sockets.hpp"
#include "pesto_server.hpp"
#include "port_forwarder.hpp"
#include "rknp.h"

namespace pasta {

namespace {

constexpr int kChildTimeoutMs = 30000;
constexpr int kTickMs = 1000; // pasta rescans "auto" ports every second

struct LogLevel {
    bool quiet, debug;
};

// Called on any library thread; one fprintf is one locked write.
void log_to_stderr(void *user, int32_t level, const char *msg) {
    static const char *names[] = {"error", "warning", "info", "debug"};
    const auto *l = static_cast<const LogLevel *>(user);
    if (level == RKNP_LOG_DEBUG && !l->debug) return;
    if (level == RKNP_LOG_INFO && l->quiet) return;
    std::fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name,
                 names[level >= 0 && level <= 3 ? level : 0], msg);
}

// Waits until the hand-over child has exited; throws unless it handed the
// tap over.
void wait_for_handover(cmd::ChildProcess &child) {
    long deadline = cmd::now_ms() + kChildTimeoutMs;
    int ws = 0;
    while (!child.try_reap(&ws)) {
        if (cmd::now_ms() > deadline)
            throw cmd::Failure("timeout handing the tap over");
        ::usleep(5000);
    }
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
        throw cmd::Failure("the hand-over child failed (see above)");
}

// The user namespace to join: --userns, else the PID's unless
// --netns-only; with --netns and no --userns, none (pasta's --netns-only).
std::optional<std::string> user_namespace(const Options &o) {
    if (o.userns) return o.userns;
    if (o.netns_only || o.netns) return std::nullopt;
    return "/proc/" + std::to_string(o.target_pid) + "/ns/user";
}

cmd::UniqueFd open_for_writing(const std::string &path, int flags) {
    cmd::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0600));
    if (!fd) throw cmd::sys_failure("open " + path);
    return fd;
}

void write_all(int fd, const std::string &s, const std::string &what) {
    if (::write(fd, s.data(), s.size()) != ssize_t(s.size()))
        throw cmd::sys_failure("write " + what);
}

// What serve() forwards: -t/-u on the parent (through backend), -T/-U on
// the relay, the table of the parent's forwards (-T/-U "auto" leaves
// those ports out) and, where the namespace can be entered, -t's loopback
// clients the library hands over (handoff, else null).
struct Forwarders {
    PortForwarder &ports;
    NsForwarder &ns_ports;
    LoopbackRelay &relay;
    const ForwardTable &table;
    cmd::ForwardBackend &backend;
    LoopbackHandoff *handoff;
};

// Serves until a signal, the target going away, or the namespace's /proc
// files becoming unreadable. One poll over the signals, the target, the
// -c socket's listener and clients and -T/-U's relay (none waits on
// another); the target and "auto" are looked at every tick and when the
// target's fd fires.
void serve(const Forwarders &fwd, const cmd::TargetWatch &watch,
           int sigfd, cmd::ControlSocket *control, const LogLevel &log) {
    std::vector<pollfd> fds;
    long next_tick = cmd::now_ms() + kTickMs;
    for (;;) {
        long now = cmd::now_ms();
        fds.clear();
        fds.push_back({sigfd, POLLIN, 0});
        if (watch.fd() >= 0) fds.push_back({watch.fd(), POLLIN, 0});
        size_t first = fds.size();
        size_t count = control ? control->fill(fds, now) : 0;
        size_t handoff_first = fds.size();
        size_t handoff_count = fwd.handoff ? fwd.handoff->fill(fds) : 0;
        size_t relay_first = fds.size();
        size_t relay_count = fwd.relay.fill(fds, now);
        int timeout = int(std::max(0L, next_tick - now));
        if (int t = control ? control->timeout_ms(now) : -1; t >= 0 && t < timeout)
            timeout = t;
        int r = ::poll(fds.data(), fds.size(), timeout);
        if (r < 0) {
            if (errno == EINTR) continue;
            throw cmd::sys_failure("poll");
        }
        if (fds[0].revents & POLLIN) {
            if (int sig = cmd::read_signal(sigfd)) {
                if (log.debug)
                    std::fprintf(stderr, "%s: signal %d, stopping\n",
                                 program_invocation_short_name, sig);
                return;
            }
        }
        if (control)
            control->dispatch(std::span(fds).subspan(first, count), cmd::now_ms());
        if (relay_count)
            fwd.relay.dispatch(std::span(fds).subspan(relay_first, relay_count),
                               cmd::now_ms());
        // After the relay's dispatch: the pairs it starts join the next fill.
        if (handoff_count)
            fwd.handoff->dispatch(std::span(fds).subspan(handoff_first, handoff_count),
                                  fwd.relay);
        bool watch_fired = watch.fd() >= 0 && fds[1].revents != 0;
        now = cmd::now_ms();
        if (!watch_fired && now < next_tick) continue;
        next_tick = now + kTickMs;
        if (watch.gone()) {
            if (!log.quiet)
                std::fprintf(stderr, "%s: the namespace is gone, stopping\n",
                             program_invocation_short_name);
            return;
        }
        if (fwd.ports.scans() && !fwd.ports.rescan(fwd.backend, fwd.relay)) {
            if (!log.quiet)
                std::fprintf(stderr, "%s: the namespace's ports cannot be read, "
                                     "stopping\n", program_invocation_short_name);
            return;
        }
        if (fwd.ns_ports.scans() && !fwd.ns_ports.rescan(fwd.relay, fwd.table)) {
            if (!log.quiet)
                std::fprintf(stderr, "%s: the host's ports cannot be read, "
                                     "stopping\n", program_invocation_short_name);
            return;
        }
        fwd.relay.expire(now);
    }
}

// Closes every fd above stderr: the background must hold nothing of its
// caller's (a pipe it kept open would keep the caller waiting for EOF).
void close_inherited_fds() {
#ifdef SYS_close_range
    if (::syscall(SYS_close_range, 3u, ~0u, 0u) == 0) return;
#endif
    for (int fd = 3; fd < 65536; fd++) ::close(fd);
}

int run(int argc, char *argv[]) {
    // Before anything else: the background and the hand-over child inherit
    // it, and both enter namespaces the container controls.
    cmd::stay_undumpable();
    close_inherited_fds();
    Options o = parse_args(argc, argv);
    const std::optional<Upstream> up = host_upstream();
    if (!up && !o.quiet)
        std::fprintf(stderr, "rknp-pasta: no IPv4 default route on the host: "
                             "the namespace gets 10.0.2.100/24\n");
    const std::optional<Upstream6> up6 = o.ipv4_only ? std::nullopt : host_upstream6();
    NetworkModel model(o, up, up6);
    if (!up6 && !o.ipv4_only && !o.quiet && model.get().enable_ipv6 == 0)
        std::fprintf(stderr, "rknp-pasta: no global IPv6 address with a default "
                             "route on the host: the namespace gets no IPv6\n");
    // Forwards reach the namespace's IPv4 address, which -6 leaves out.
    for (const auto *specs : {&o.tcp, &o.udp})
        if (o.ipv6_only &&
            (specs->empty() || std::any_of(specs->begin(), specs->end(),
                                           [](const std::string &v) { return v != "none"; })))
            throw cmd::Failure(std::string(specs == &o.tcp ? "-t/--tcp-ports" : "-u/--udp-ports") +
                               ": with -6/--ipv6-only only none (forwards reach the "
                               "namespace's IPv4 address, which -6 leaves out)");
    rknp_config cfg = model.get();
    // Every forward in force, the command line's, "auto"'s and rknp-pesto's.
    ForwardTable table;
    // The host side: "::" too unless -4, whatever the namespace has.
    PortForwarder forwarder(o, !o.ipv4_only, table);
    // -T/-U: the namespace's loopback to the host's, ::1 too unless -4.
    NsForwarder ns_forwarder(o, !o.ipv4_only);
    LogLevel log{o.quiet, o.debug};
    cfg.log_fn = log_to_stderr;
    cfg.log_user_data = &log;
    cmd::UniqueFd log_fd, pid_fd;
    if (o.log_file) log_fd = open_for_writing(*o.log_file, O_APPEND);
    if (o.pid_file) pid_fd = open_for_writing(*o.pid_file, O_TRUNC);

    Background bg = Background::start(o.foreground);

    cmd::StateDir state("rknp-pasta"); // removed after the parent is closed
    rknp_network net{};
    cmd::ParentPtr parent = cmd::new_parent(cfg, net);
    rknp_error *err = nullptr;

    cmd::ChildPlan plan;
    plan.ns = cmd::target_namespaces(o.target_pid, o.netns, user_namespace(o));
    plan.configure = o.config_net;
    plan.network = net;
    plan.remove_dir = state.path();
    plan.close_fds = {log_fd.get(), pid_fd.get()};
    plan.netns_files = forwarder.netns_files();
    plan.quiet = o.quiet;
    cmd::ChildProcess child(plan);

    // -t's loopback clients spliced into the namespace (loopback_handoff.hpp)
    // with --splice, wherever its sockets can be opened: with a user
    // namespace to enter, or as root. Not by default: into the namespace
    // at MTU 65520 two loopback connections in a row carried half what
    // the tap does on 2 vCPUs (README, "Loopback clients of -t").
    const bool can_enter = ::geteuid() == 0 || plan.ns.userns.has_value();
    if (o.splice && !can_enter)
        std::fprintf(stderr, "%s: warning: --splice needs a user namespace to enter "
                             "(or root); -t's loopback clients go through the stack\n",
                     program_invocation_short_name);
    std::optional<LoopbackHandoff> handoff;
    if (can_enter && o.splice && !o.ipv6_only && forwarder.forwards_tcp())
        handoff.emplace(net.ip, o.host_lo_to_ns_lo);

    // -T/-U, --host-lo-to-ns-lo and the splice: the namespace, for the
    // thread that opens sockets there, and the host's /proc/net files for
    // -T/-U "auto", both before the sandbox hides their paths (the
    // hand-over child has forked: it holds neither).
    cmd::UniqueFd netns_fd;
    if (ns_forwarder.active() || forwarder.relays_to_ns() || handoff) {
        netns_fd.reset(::open(plan.ns.netns.c_str(), O_RDONLY | O_CLOEXEC));
        if (!netns_fd) throw cmd::sys_failure("open " + plan.ns.netns);
    }
    if (ns_forwarder.active()) ns_forwarder.open_host_files();

    // rknp-pesto's socket: bound after the hand-over child forked (it
    // enters the container's namespaces and must not hold it) and while the
    // process has one thread (ControlSocket's umask), before the caller
    // returns (rootlesskit and Podman run rknp-pesto right after).
    cmd::RknpForwards direct(parent.get());
    HandoffForwards forwards(direct, handoff ? &*handoff : nullptr);
    std::optional<PestoServer> pesto;
    std::optional<cmd::ControlSocket> control;
    if (o.conf_path) {
        pesto.emplace(table, forwards, cfg.guest_address ? cfg.guest_address : "",
                      !o.ipv4_only, cmd::host_ephemeral_range());
        control.emplace(*o.conf_path, *pesto, "-c/--conf-path");
    }

    // Opened before the sandbox hides the paths and seccomp forbids
    // pidfd_open.
    cmd::TargetWatch watch(o.target_pid, o.netns, !o.no_netns_quit);
    cmd::UniqueFd sigfd = cmd::block_signals();
    const bool sandbox = can_enter;
    if (sandbox) {
        if (::geteuid() != 0) cmd::enter_user_as_root(*plan.ns.userns);
        cmd::create_sandbox(state.path(), false);
    } else if (o.debug) {
        std::fprintf(stderr, "%s: no mount sandbox (not root, no user "
                             "namespace to join)\n", program_invocation_short_name);
    }
    // -T/-U's thread enters the namespace now: after the user namespace
    // (which needs one thread) and the new root (which it shares), while
    // it still has the capabilities setns needs, before seccomp forbids
    // setns. It drops its capabilities there, as this thread does next,
    // and the filter covers it too (enable_seccomp synchronises every
    // thread).
    std::optional<NsSockets> ns_sockets;
    if (netns_fd) {
        try {
            ns_sockets.emplace(std::move(netns_fd), sandbox ? cmd::drop_capabilities
                                                            : std::function<void()>());
        } catch (const cmd::Failure &e) {
            if (ns_forwarder.active() || forwarder.relays_to_ns()) throw;
            // Only the splice wanted it: a start that worked before it
            // still works, its loopback clients through the stack.
            if (!o.quiet)
                std::fprintf(stderr, "%s: warning: %s; -t's loopback clients go "
                                     "through the stack\n",
                             program_invocation_short_name, e.what());
            forwards.set_handoff(nullptr);
            handoff.reset();
        }
    }
    if (sandbox) cmd::drop_capabilities();
    cmd::enable_seccomp(o.debug);
    LoopbackRelay relay([&ns_sockets](int family, int type) {
        if (!ns_sockets) {
            errno = ENOTSUP;
            return cmd::UniqueFd();
        }
        return ns_sockets->open(family, type);
    });

    cmd::check(rknp_parent_start(parent.get(), state.path().c_str(), child.pid(),
                                 &err),
               err, "rknp_parent_start");
    try {
        child.send_opaque(parent.get());
    } catch (const cmd::Failure &) {
        // The child is gone; its exit status says why.
    }
    wait_for_handover(child);
    rknp_stats stats{};
    stats.struct_size = sizeof stats;
    cmd::check(rknp_parent_stats(parent.get(), &stats, &err), err, "rknp_parent_stats");
    if (!stats.tap_attached) throw cmd::Failure("the tap was not handed over");
    // Explicit ports first: an "auto" port that is also named keeps the
    // named mapping.
    forwarder.bind_explicit(forwards);
    if (forwarder.scans()) {
        forwarder.set_netns_files(child.take_netns_files());
        forwarder.rescan(forwards, relay);
    }
    ns_forwarder.bind_explicit(relay);
    if (ns_forwarder.scans()) ns_forwarder.rescan(relay, table);

    if (pid_fd) {
        write_all(pid_fd.get(), std::to_string(::getpid()) + "\n", *o.pid_file);
        pid_fd.reset();
    }
    if (!o.quiet) {
        const std::string v6 = model.ipv6_summary();
        std::fprintf(stderr, "%s: %s %s/%u via %s%s%s, MTU %u, in background\n",
                     program_invocation_short_name, cfg.ifname,
                     o.ipv6_only ? "(no IPv4)" : net.ip, net.prefix_len, net.gateway,
                     v6.empty() ? "" : ", ", v6.c_str(), net.mtu);
    }
    bg.ready(log_fd.get());
    log_fd.reset();
    serve(Forwarders{forwarder, ns_forwarder, relay, table, forwards,
                     handoff ? &*handoff : nullptr},
          watch,
          sigfd.get(), control ? &*control : nullptr, log);
    rknp_parent_close(parent.get());
    return EXIT_SUCCESS;
}

} // namespace

} // namespace pasta

int main(int argc, char *argv[]) {
    cmd::hold_mmap_threshold(); // before the stack thread starts
    try {
        int code = pasta::run(argc, argv);
        std::fflush(nullptr);
        return code;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, e.what());
        std::fflush(nullptr);
        return EXIT_FAILURE;
    }
}
