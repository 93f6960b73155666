// SPDX-License-Identifier: Apache-2.0

// The hand-over's listening socket: its path length, its mode from
// creation on (no chmod by path) and the state directory it may live in.
#include <doctest/doctest.h>

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <string>

#include "common/error.hpp"
#include "common/fd.hpp"
#include "handover/server.hpp"
#include "temp_dir.hpp"

using namespace rknp;
using namespace rknp::handover;

TEST_CASE("a socket path longer than sun_path is refused with a clear error") {
    std::string dir = "/tmp/" + std::string(120, 'x');
    CHECK_THROWS_WITH_AS(listen_socket(dir, "rknp.sock"),
                         doctest::Contains("use a shorter state directory"),
                         Error);
}

namespace {

// Installs a filter on this (forked) process that fails every chmod by
// path with EPERM; fchmod on an fd stays allowed.
bool forbid_path_chmod() {
    sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_chmod, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_fchmodat, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 452 /* fchmodat2 */, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
    };
    sock_fprog prog{sizeof f / sizeof f[0], f};
    return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
           ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

} // namespace

TEST_CASE("the socket is 0600 from its creation, with no chmod by path") {
    // A chmod by path after bind follows whatever the path is by then; the
    // socket must get its mode without one, whatever the umask.
    TempDir dir;
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::umask(0);
        if (!forbid_path_chmod()) ::_exit(10);
        try {
            UniqueFd s = listen_socket(dir.path(), "rknp.sock");
            struct stat st {};
            if (::lstat((dir.path() + "/rknp.sock").c_str(), &st) < 0) ::_exit(11);
            ::_exit(S_ISSOCK(st.st_mode) && (st.st_mode & 07777) == 0600 ? 0 : 12);
        } catch (const std::exception &e) {
            std::fprintf(stderr, "listen_socket: %s\n", e.what());
            ::_exit(13);
        }
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("a state directory others could write to, or not ours, is refused") {
    TempDir dir;
    SUBCASE("group or world writable") {
        REQUIRE(::chmod(dir.path().c_str(), 0777) == 0);
        CHECK_THROWS_WITH_AS(listen_socket(dir.path(), "rknp.sock"),
                             ("hand-over: state directory " + dir.path() +
                              " (owner uid " + std::to_string(::geteuid()) +
                              ") has mode 0777: group or others may write to it; "
                              "refusing it")
                                 .c_str(),
                             Error);
        REQUIRE(::chmod(dir.path().c_str(), 0720) == 0);
        CHECK_THROWS_AS(listen_socket(dir.path(), "rknp.sock"), Error);
        CHECK(::access((dir.path() + "/rknp.sock").c_str(), F_OK) != 0);
    }
    SUBCASE("readable by others, as rootlesskit's --state-dir makes it (0755)") {
        REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
        CHECK_NOTHROW(listen_socket(dir.path(), "rknp.sock"));
    }
    SUBCASE("owned by another user") {
        if (::geteuid() != 0) return; // needs chown; CI runs as root
        REQUIRE(::chown(dir.path().c_str(), 65534, 65534) == 0);
        CHECK_THROWS_WITH_AS(listen_socket(dir.path(), "rknp.sock"),
                             ("hand-over: state directory " + dir.path() +
                              " is owned by uid 65534 (mode 0700), not by this "
                              "process's uid 0; refusing it")
                                 .c_str(),
                             Error);
    }
    SUBCASE("a symlink to a good directory") {
        TempDir real;
        std::string link = dir.path() + "/link";
        REQUIRE(::symlink(real.path().c_str(), link.c_str()) == 0);
        CHECK_THROWS_WITH_AS(listen_socket(link, "rknp.sock"),
                             doctest::Contains(
                                 ("hand-over: state directory " + link).c_str()),
                             Error);
        CHECK(::access((real.path() + "/rknp.sock").c_str(), F_OK) != 0);
    }
}
