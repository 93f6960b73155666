// SPDX-License-Identifier: Apache-2.0

// rknp-slirp4netns's --enable-sandbox and --enable-seccomp asked to do
// what they must prevent: each case runs in a forked child that enters the
// sandbox and/or loads the filter, then tries to exec, to open files
// outside what the stack needs, to write where it must not, to create
// namespaces; the child's exit code or killing signal says what happened.
// What the stack does need (sockets, threads, its state dir) must still work.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "../unit/temp_dir.hpp"
#include "cmd/common/errors.hpp"
#include "cmd/common/sandbox.hpp"
#include "cmd/common/seccomp_filter.hpp"

namespace {

constexpr int kAllGood = 42; // a child's "every check passed"

// Runs fn in a forked child (its return value is the exit code; an
// exception is 99) and returns the wait status.
int in_child(const std::function<int()> &fn) {
    std::fflush(nullptr); // or the child's exit may print buffered output again
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        int rc = 99;
        try {
            rc = fn();
        } catch (...) {
        }
        ::_exit(rc);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    return status;
}

bool killed_by(int status, int sig) { return WIFSIGNALED(status) && WTERMSIG(status) == sig; }
int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status); }

int try_exec(const char *path) {
    ::execl(path, path, static_cast<char *>(nullptr));
    return errno; // only reached when exec failed
}

// What libslirp and the stack thread do: a thread, a UDP socket on
// loopback, a datagram to itself.
int stack_calls_work() {
    int ok = 0;
    std::thread([&] {
        int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0) return;
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        char b = 'x';
        if (::bind(s, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0 &&
            ::getsockname(s, reinterpret_cast<sockaddr *>(&a), &len) == 0 &&
            ::sendto(s, &b, 1, 0, reinterpret_cast<sockaddr *>(&a), sizeof a) == 1 &&
            ::recv(s, &b, 1, 0) == 1)
            ok = 1;
        ::close(s);
    }).join();
    return ok;
}

uint32_t effective_caps() {
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    if (::syscall(SYS_capget, &hdr, data) < 0) return ~0u;
    return data[0].effective | data[1].effective;
}

} // namespace

TEST_CASE("seccomp: exec kills the process") {
    int st = in_child([] {
        cmd::enable_seccomp();
        try_exec("/bin/true");
        return 1;
    });
    CHECK_MESSAGE(killed_by(st, SIGSYS), "status ", exit_code(st));
}

TEST_CASE("seccomp: creating a namespace kills the process") {
    int st = in_child([] {
        cmd::enable_seccomp();
        ::unshare(CLONE_NEWUSER);
        return 1;
    });
    CHECK_MESSAGE(killed_by(st, SIGSYS), "status ", exit_code(st));
    st = in_child([] {
        cmd::enable_seccomp();
        ::syscall(SYS_setns, -1, 0);
        return 1;
    });
    CHECK_MESSAGE(killed_by(st, SIGSYS), "status ", exit_code(st));
}

TEST_CASE("seccomp: what the stack needs still works") {
    int st = in_child([] {
        cmd::enable_seccomp();
        return stack_calls_work() ? kAllGood : 1;
    });
    CHECK(exit_code(st) == kAllGood);
}

TEST_CASE("sandbox: no host files, no exec, writes only to the state dir") {
    if (::geteuid() != 0) {
        MESSAGE("skipped: creating the sandbox needs root (CAP_SYS_ADMIN)");
        return;
    }
    TempDir state;   // under /tmp, where the sandbox's own root is mounted
    char outside_tmpl[] = "/var/tmp/rknp-sbx.XXXXXX";
    REQUIRE(::mkdtemp(outside_tmpl) != nullptr);
    std::string outside = outside_tmpl;
    std::ofstream(outside + "/secret") << "host file\n";
    // An executable inside the writable state dir: still not executable.
    std::filesystem::copy_file("/bin/true", state.path() + "/true");
    std::string st_dir = state.path();
    int st = in_child([&] {
        cmd::create_sandbox(st_dir);
        if (::open((outside + "/secret").c_str(), O_RDONLY) >= 0 || errno != ENOENT) return 10;
        if (::open("/usr/bin/true", O_RDONLY) >= 0) return 11;
        if (::open("/etc/passwd", O_RDONLY) < 0) return 12; // /etc is kept (resolv.conf)
        if (::open("/etc/rknp-sandbox-test", O_CREAT | O_WRONLY, 0600) >= 0) return 13;
        int fd = ::open((st_dir + "/written").c_str(), O_CREAT | O_WRONLY, 0600);
        if (fd < 0) return 14;
        ::close(fd);
        if (try_exec("/bin/true") != ENOENT) return 15;
        if (try_exec((st_dir + "/true").c_str()) != EACCES) return 16; // noexec
        if (::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) return 17;
        if (effective_caps() != (1u << CAP_NET_BIND_SERVICE)) return 18;
        if (!stack_calls_work()) return 19;
        return kAllGood;
    });
    CHECK(exit_code(st) == kAllGood);
    CHECK(std::filesystem::exists(state.path() + "/written"));
    CHECK_FALSE(std::filesystem::exists("/etc/rknp-sandbox-test"));
    std::filesystem::remove_all(outside);
}

TEST_CASE("sandbox and seccomp together, as rknp-slirp4netns runs: exec kills") {
    if (::geteuid() != 0) {
        MESSAGE("skipped: creating the sandbox needs root (CAP_SYS_ADMIN)");
        return;
    }
    TempDir state;
    std::filesystem::copy_file("/bin/true", state.path() + "/true");
    std::string st_dir = state.path();
    int st = in_child([&] {
        cmd::create_sandbox(st_dir);
        cmd::enable_seccomp();
        try_exec((st_dir + "/true").c_str());
        return 1;
    });
    CHECK_MESSAGE(killed_by(st, SIGSYS), "status ", exit_code(st));
}
