// SPDX-License-Identifier: Apache-2.0

// The stack thread's sandbox confines the thread that installs it and no
// other: a confined thread cannot open files for reading or writing
// (resolv.conf's directory aside), exec, make AF_UNIX sockets or map
// executable memory, while a sibling thread of the same process, alive at
// the same time, still can.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>

#include "parent/sandbox.hpp"
#include "temp_dir.hpp"

using namespace rknp;

namespace {

// -errno of a failed call, or 0 once the returned fd is closed.
int try_open(const std::string &path, int flags) {
    int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0600);
    if (fd < 0) return -errno;
    ::close(fd);
    return 0;
}

int try_exec() {
    char *argv[] = {const_cast<char *>("/bin/true"), nullptr};
    char *envp[] = {nullptr};
    ::execve("/bin/true", argv, envp); // returns only on failure
    return -errno;
}

int try_socket(int domain, int type) {
    int fd = ::socket(domain, type | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    ::close(fd);
    return 0;
}

int try_exec_mapping() {
    void *p = ::mmap(nullptr, 4096, PROT_READ | PROT_EXEC,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -errno;
    ::munmap(p, 4096);
    return 0;
}

std::string seccomp_mode(pid_t tid) {
    std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("Seccomp:", 0) == 0) return line.substr(8);
    return "?";
}

struct Results {
    uint32_t bits = 0;
    pid_t tid = 0;
    int read_file = 1, write_file = 1, read_resolv = 1, exec = 1;
    int unix_socket = 1, tcp_socket = 1, exec_map = 1;
};

} // namespace

TEST_CASE("the sandbox confines the calling thread only") {
    TempDir dir;
    std::string file = dir.path() + "/secret";
    std::ofstream(file) << "x";
    bool have_resolv = ::access("/etc/resolv.conf", R_OK) == 0;

    std::promise<Results> confined;
    std::promise<void> sibling_done;
    std::thread t([&] {
        Results r;
        r.tid = pid_t(::syscall(SYS_gettid));
        r.bits = confine_stack_thread(Logger());
        r.read_file = try_open(file, O_RDONLY);
        r.write_file = try_open(file, O_WRONLY);
        if (have_resolv) r.read_resolv = try_open("/etc/resolv.conf", O_RDONLY);
        r.exec = try_exec();
        r.unix_socket = try_socket(AF_UNIX, SOCK_STREAM);
        r.tcp_socket = try_socket(AF_INET, SOCK_STREAM);
        r.exec_map = try_exec_mapping();
        confined.set_value(r);
        // Stay alive (confined) while the sibling checks.
        sibling_done.get_future().wait();
    });
    Results r = confined.get_future().get();

    // This thread, while the confined one is alive: untouched.
    CHECK(seccomp_mode(pid_t(::syscall(SYS_gettid))).find('0') !=
          std::string::npos);
    CHECK(try_open(file, O_RDONLY) == 0);
    CHECK(try_open(file, O_WRONLY) == 0);
    CHECK(try_socket(AF_UNIX, SOCK_STREAM) == 0);
    CHECK(try_exec_mapping() == 0);
    if (r.bits & RKNP_SANDBOX_SECCOMP)
        CHECK(seccomp_mode(r.tid).find('2') != std::string::npos);
    sibling_done.set_value();
    t.join();

    // seccomp is in every kernel this runs on; Landlock where enabled.
    REQUIRE((r.bits & RKNP_SANDBOX_SECCOMP) != 0);
    MESSAGE("sandbox bits: " << r.bits);
    CHECK(r.write_file == -EPERM);
    CHECK(r.exec == -EPERM);
    CHECK(r.unix_socket == -EPERM);
    CHECK(r.exec_map == -EPERM);
    CHECK(r.tcp_socket == 0); // guest flows still get host sockets
    if (r.bits & RKNP_SANDBOX_LANDLOCK) {
        CHECK(r.read_file == -EACCES);
        if (have_resolv) CHECK(r.read_resolv == 0);
    }
}
