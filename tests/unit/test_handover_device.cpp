// SPDX-License-Identifier: Apache-2.0

// The parent checks that a handed-over fd is /dev/net/tun's character
// device (10:200) before it issues any ioctl on it: an ioctl runs the fd's
// driver, and a FUSE or CUSE file's may block the stack thread for good.
// The server runs in a forked child whose seccomp filter kills it on
// ioctl(TUNGETIFF): a fd refused without that ioctl leaves the child alive.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "common/error.hpp"
#include "common/fd.hpp"
#include "handover/client.hpp"
#include "handover/messages.hpp"
#include "handover/server.hpp"
#include "temp_dir.hpp"

using namespace rknp;
using namespace rknp::handover;

namespace {

constexpr int kRefusedAsNotTun = 0, kOtherOutcome = 1, kNoFilter = 2;

int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// The child: serves one hand-over from client on listener with
// ioctl(TUNGETIFF) fatal, and exits with how it ended.
[[noreturn]] void serve_without_tungetiff(UniqueFd listener, pid_t client,
                                          const Tokens &tokens) {
    Server server(std::move(listener), client, ::geteuid(), tokens, 5000);
    scmp_filter_ctx c = seccomp_init(SCMP_ACT_ALLOW);
    const scmp_arg_cmp is_tungetiff{1, SCMP_CMP_EQ, scmp_datum_t(TUNGETIFF), 0};
    if (c == nullptr ||
        seccomp_rule_add(c, SCMP_ACT_KILL_PROCESS, SCMP_SYS(ioctl), 1,
                         is_tungetiff) != 0 ||
        seccomp_load(c) != 0)
        ::_exit(kNoFilter);
    seccomp_release(c);
    const int64_t end = now_ms() + 10000;
    while (now_ms() < end) {
        pollfd p[2] = {{server.listen_fd(), POLLIN, 0}, {-1, POLLIN, 0}};
        if (server.pending() > 0) p[1].fd = server.pending_fd(0);
        ::poll(p, 2, 100);
        try {
            if (p[1].revents != 0) server.receive(p[1].fd, [](Accepted &&) {});
            if (p[0].revents & POLLIN) server.accept_one(now_ms());
        } catch (const Error &e) {
            ::_exit(e.code() == RKNP_ERR_PROTOCOL &&
                            std::string(e.what()) ==
                                "hand-over: the fd is not a tun/tap device"
                        ? kRefusedAsNotTun
                        : kOtherOutcome);
        }
        if (!server.listening()) ::_exit(kOtherOutcome); // adopted
    }
    ::_exit(kOtherOutcome);
}

struct Outcome {
    int wait_status = 0;
    std::string client_error;
};

// Hands fd over to a server in a child process that dies on TUNGETIFF.
Outcome hand_over(int fd) {
    TempDir dir;
    const Tokens tokens = random_tokens();
    UniqueFd listener = listen_socket(dir.path(), "rknp.sock");
    const pid_t me = ::getpid();
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) serve_without_tungetiff(std::move(listener), me, tokens);
    listener.reset();
    Outcome o;
    try {
        send_tap(dir.path() + "/rknp.sock", fd, "tap0", tokens, 5000);
    } catch (const Error &e) {
        o.client_error = e.what();
    }
    REQUIRE(::waitpid(child, &o.wait_status, 0) == child);
    return o;
}

bool exited_with(const Outcome &o, int code) {
    return WIFEXITED(o.wait_status) && WEXITSTATUS(o.wait_status) == code;
}

} // namespace

TEST_CASE("a fd that is not /dev/net/tun's device is refused before any ioctl") {
    UniqueFd fd;
    SUBCASE("a pipe") {
        int p[2];
        REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
        fd.reset(p[0]);
        ::close(p[1]);
    }
    SUBCASE("a regular file") {
        TempDir dir;
        std::string f = dir.path() + "/file";
        fd.reset(::open(f.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
        ::unlink(f.c_str());
    }
    SUBCASE("another character device (/dev/null, 1:3)") {
        fd.reset(::open("/dev/null", O_RDWR | O_CLOEXEC));
    }
    SUBCASE("an eventfd") { fd.reset(::eventfd(0, EFD_CLOEXEC)); }
    REQUIRE(fd.valid());
    Outcome o = hand_over(fd.get());
    CHECK_FALSE(exited_with(o, kNoFilter));
    // Killed by SIGSYS means the server issued TUNGETIFF on it.
    CHECK_FALSE((WIFSIGNALED(o.wait_status) && WTERMSIG(o.wait_status) == SIGSYS));
    CHECK(exited_with(o, kRefusedAsNotTun));
    CHECK(o.client_error ==
          "parent refused the tap: hand-over: the fd is not a tun/tap device");
}

TEST_CASE("control: /dev/net/tun's device does reach the ioctl (the filter works)") {
    UniqueFd tun(::open("/dev/net/tun", O_RDWR | O_CLOEXEC));
    if (!tun) {
        MESSAGE("no /dev/net/tun here: skipped");
        return;
    }
    // Not attached to an interface: passes the device check, and the
    // server's TUNGETIFF is what kills the child.
    Outcome o = hand_over(tun.get());
    CHECK(WIFSIGNALED(o.wait_status));
    CHECK(WTERMSIG(o.wait_status) == SIGSYS);
}
