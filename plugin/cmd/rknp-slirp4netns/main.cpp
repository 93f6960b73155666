// SPDX-License-Identifier: Apache-2.0

// rknp-slirp4netns: a slirp4netns-compatible command on the public rknp C
// ABI. Order: fork the child half while single-threaded, open the API
// socket, enter the sandbox and load seccomp, then start the rknp parent
// (its stack thread inherits all of that), hand the opaque pairs to the
// child, signal --ready-fd and serve until --exit-fd or a signal.
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hostfwd_api.hpp"
#include "cmd/common/malloc_policy.hpp"
#include "cmd/common/child_process.hpp"
#include "cmd/common/control_socket.hpp"
#include "cli.hpp"
#include "cmd/common/errors.hpp"
#include "cmd/common/monotonic.hpp"
#include "cmd/common/namespaces.hpp"
#include "network_config.hpp"
#include "rknp.h"
#include "cmd/common/rknp_handle.hpp"
#include "cmd/common/sandbox.hpp"
#include "cmd/common/seccomp_filter.hpp"
#include "cmd/common/signals.hpp"
#include "cmd/common/state_dir.hpp"
#include "cmd/common/target_watch.hpp"
#include "cmd/common/unique_fd.hpp"

namespace s4n {

namespace {

constexpr int kChildTimeoutMs = 30000;
constexpr int kTargetTickMs = 1000;

bool debug_enabled() {
    const char *v = std::getenv("RKNP_SLIRP4NETNS_DEBUG");
    return v && *v && std::strcmp(v, "0") != 0;
}

// Called on any library thread; one fprintf is one locked write.
void log_to_stderr(void *user, int32_t level, const char *msg) {
    static const char *names[] = {"error", "warning", "info", "debug"};
    bool debug = user != nullptr;
    if (level > RKNP_LOG_INFO && !debug) return;
    std::fprintf(stderr, "rknp: %s: %s\n",
                 names[level >= 0 && level <= 3 ? level : 0], msg);
}

std::string ipv4(uint32_t host_order) {
    in_addr a{htonl(host_order)};
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a, buf, sizeof buf);
    return buf;
}

// slirp4netns' start-up summary on stdout.
void print_banner(const rknp_network &net, const Options &o, bool dhcp) {
    in_addr ip{};
    inet_pton(AF_INET, net.ip, &ip);
    uint32_t mask = net.prefix_len ? ~uint32_t(0) << (32 - net.prefix_len) : 0;
    uint32_t network = ntohl(ip.s_addr) & mask;
    std::printf("Starting slirp (rknp %s)\n", rknp_library_version());
    std::printf("* MTU:             %u\n", net.mtu);
    std::printf("* Network:         %s\n", ipv4(network).c_str());
    std::printf("* Netmask:         %s\n", ipv4(mask).c_str());
    std::printf("* Gateway:         %s\n", net.gateway);
    if (net.dns_count > 0) std::printf("* DNS:             %s\n", net.dns[0]);
    if (dhcp) {
        std::printf("* DHCP begin:      %s\n", ipv4(network + 15).c_str());
        std::printf("* DHCP end:        %s\n", ipv4(network + 30).c_str());
    }
    std::printf("* Recommended IP:  %s\n", net.ip);
    if (o.api_socket) std::printf("* API Socket:      %s\n", o.api_socket->c_str());
    if (o.outbound_addr)
        std::printf("* Outbound IPv4:    %s\n", o.outbound_addr->c_str());
    if (o.outbound_addr6)
        std::printf("* Outbound IPv6:    %s\n", o.outbound_addr6->c_str());
    if (o.macaddress) std::printf("* MAC address:     %s\n", o.macaddress->c_str());
    if (!o.disable_host_loopback)
        std::printf("WARNING: 127.0.0.1:* on the host is accessible as %s (set "
                    "--disable-host-loopback to prohibit connecting to "
                    "127.0.0.1:*)\n",
                    net.gateway);
    std::fflush(stdout);
}

struct Outcome {
    int exit_code = 0;
    int signal = 0; // non-zero: die by this signal after cleaning up
};

// Waits for the child half to hand the tap over. Returns an outcome when
// the program must stop instead.
std::optional<Outcome> wait_for_child(cmd::ChildProcess &child, int sigfd,
                                      int exit_fd) {
    long deadline = cmd::now_ms() + kChildTimeoutMs;
    for (;;) {
        int ws = 0;
        if (child.try_reap(&ws)) {
            if (!WIFEXITED(ws)) {
                std::fprintf(stderr, "child failed(wstatus=%d, !WIFEXITED)\n", ws);
                return Outcome{EXIT_FAILURE, 0};
            }
            if (WEXITSTATUS(ws) != 0) {
                std::fprintf(stderr, "child failed(%d)\n", WEXITSTATUS(ws));
                return Outcome{WEXITSTATUS(ws), 0};
            }
            return std::nullopt;
        }
        if (cmd::now_ms() > deadline) {
            std::fprintf(stderr, "child failed(timeout handing over the tap)\n");
            return Outcome{EXIT_FAILURE, 0};
        }
        pollfd fds[2] = {{sigfd, POLLIN, 0}, {exit_fd, POLLIN, 0}};
        int r = ::poll(fds, exit_fd >= 0 ? 2 : 1, 10);
        if (r < 0 && errno != EINTR) throw cmd::sys_failure("poll");
        if (r > 0 && (fds[0].revents & POLLIN)) {
            if (int sig = cmd::read_signal(sigfd)) return Outcome{0, sig};
        }
        if (r > 0 && exit_fd >= 0 && fds[1].revents) {
            std::fprintf(stderr, "exitfd event\n");
            return Outcome{0, 0};
        }
    }
}

// One poll over the signals, the exit fd, the target, the API's listener
// and every API client: no client waits on another, nor do signals and the
// exit fd. The target is looked at every second too (a netns path, or a
// PID without pidfd, has no fd to poll).
Outcome serve(int sigfd, int exit_fd, const cmd::TargetWatch &watch,
              cmd::ControlSocket *api) {
    std::vector<pollfd> fds;
    for (;;) {
        long now = cmd::now_ms();
        fds.clear();
        fds.push_back({sigfd, POLLIN, 0});
        size_t exit_idx = 0;
        if (exit_fd >= 0) {
            exit_idx = fds.size();
            fds.push_back({exit_fd, POLLIN, 0});
        }
        if (watch.fd() >= 0) fds.push_back({watch.fd(), POLLIN, 0});
        size_t api_first = fds.size();
        size_t api_count = api ? api->fill(fds, now) : 0;
        int timeout = api ? api->timeout_ms(now) : -1;
        if (timeout < 0 || timeout > kTargetTickMs) timeout = kTargetTickMs;
        int r = ::poll(fds.data(), fds.size(), timeout);
        if (r < 0) {
            if (errno == EINTR) continue;
            throw cmd::sys_failure("poll");
        }
        if (fds[0].revents & POLLIN) {
            if (int sig = cmd::read_signal(sigfd)) return Outcome{0, sig};
        }
        if (exit_idx > 0 && fds[exit_idx].revents) {
            std::fprintf(stderr, "exitfd event\n");
            return Outcome{0, 0};
        }
        if (watch.gone()) {
            std::fprintf(stderr, "rknp-slirp4netns: the target's namespace is "
                                 "gone, exiting\n");
            return Outcome{0, 0};
        }
        if (api)
            api->dispatch(std::span(fds).subspan(api_first, api_count),
                          cmd::now_ms());
    }
}

Outcome run(int argc, char *argv[]) {
    // Before anything else: the child half forked below inherits it, and
    // both enter namespaces the container controls.
    cmd::stay_undumpable();
    Options o = parse_args(argc, argv);
    NetworkConfig netcfg(o);
    rknp_config cfg = netcfg.get();
    bool debug = debug_enabled();
    cfg.log_fn = log_to_stderr;
    cfg.log_user_data = debug ? reinterpret_cast<void *>(1) : nullptr;

    cmd::StateDir state("rknp-slirp4netns"); // declared first: removed after the parent is closed
    rknp_network net{};
    cmd::ParentPtr parent = cmd::new_parent(cfg, net);
    rknp_error *err = nullptr;

    // Fork first: setns(CLONE_NEWUSER) and a safe fork both need a
    // single-threaded process; the stack thread starts only later.
    cmd::ChildPlan plan;
    plan.ns = cmd::target_namespaces(o.target_pid, o.netns_path, o.userns_path);
    plan.configure = o.configure;
    plan.network = net;
    // Once the tap is handed over nothing needs the socket: the child
    // removes the dir, so it goes even when the parent is SIGKILLed (as
    // rootlesskit stops slirp4netns) or only sees it through the sandbox.
    plan.remove_dir = state.path();
    plan.close_fds = {o.ready_fd, o.exit_fd};
    cmd::ChildProcess child(plan);
    if (!o.configure)
        std::printf("NOTE: without --configure the tap is left without an "
                    "address (rknp sets link up, MTU and offloads)\n");

    // Bound here, while the process has one thread (ControlSocket's umask).
    cmd::RknpForwards forwards(parent.get());
    HostFwdApi hostfwd(forwards, netcfg.recommended_guest());
    std::optional<cmd::ControlSocket> api;
    if (o.api_socket) api.emplace(*o.api_socket, hostfwd, "api socket");
    // Before the sandbox hides a netns path and seccomp forbids pidfd_open.
    cmd::TargetWatch watch(o.target_pid, o.netns_path, true);
    cmd::UniqueFd sigfd = cmd::block_signals();

    if (o.enable_sandbox) {
        if (::geteuid() != 0) {
            if (!plan.ns.userns)
                throw cmd::Failure("--enable-sandbox needs the target's user "
                              "namespace (--userns-path) when not root");
            cmd::enter_user_as_root(*plan.ns.userns);
        }
        cmd::create_sandbox(state.path());
    }
    if (o.enable_seccomp) cmd::enable_seccomp();

    cmd::check(rknp_parent_start(parent.get(), state.path().c_str(), child.pid(),
                            &err),
          err, "rknp_parent_start");
    try {
        child.send_opaque(parent.get());
    } catch (const cmd::Failure &f) {
        // Most likely the child failed to enter the namespaces and exited:
        // wait_for_child reports its status, the way slirp4netns does.
        std::fprintf(stderr, "%s\n", f.what());
    }
    if (auto stop = wait_for_child(child, sigfd.get(), o.exit_fd)) return *stop;

    rknp_stats stats{};
    stats.struct_size = sizeof stats;
    cmd::check(rknp_parent_stats(parent.get(), &stats, &err), err, "rknp_parent_stats");
    if (!stats.tap_attached) throw cmd::Failure("the tap was not handed over");
    print_banner(net, o, cfg.enable_dhcp);

    if (o.ready_fd >= 0) {
        ssize_t w;
        do
            w = ::write(o.ready_fd, "1", 1);
        while (w < 0 && errno == EINTR);
        if (w != 1) std::perror("write ready-fd");
        ::close(o.ready_fd);
    }
    Outcome out = serve(sigfd.get(), o.exit_fd, watch, api ? &*api : nullptr);
    api.reset();
    rknp_parent_close(parent.get());
    return out;
}

} // namespace

} // namespace s4n

int main(int argc, char *argv[]) {
    cmd::hold_mmap_threshold(); // before the stack thread starts
    s4n::Outcome out;
    try {
        out = s4n::run(argc, argv);
    } catch (const cmd::Failure &f) {
        // Bare, as slirp4netns prints its errors.
        std::fprintf(stderr, "%s\n", f.what());
        std::fflush(nullptr);
        return f.exit_code();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "rknp-slirp4netns: %s\n", e.what());
        std::fflush(nullptr);
        return EXIT_FAILURE;
    }
    std::fflush(nullptr);
    if (out.signal != 0) {
        // Cleaned up; now end the way slirp4netns (no handler) would.
        ::signal(out.signal, SIG_DFL);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, out.signal);
        sigprocmask(SIG_UNBLOCK, &set, nullptr);
        ::raise(out.signal);
    }
    return out.exit_code;
}
