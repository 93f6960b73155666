// SPDX-License-Identifier: Apache-2.0

// The foreground/background split (see background.hpp).
#include "background.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "cmd/common/errors.hpp"

namespace pasta {

namespace {

constexpr char kReady = 'R';

// The caller's process: wait for the report, exit with it.
[[noreturn]] void wait_for_background(pid_t pid, int report) {
    char c = 0;
    ssize_t n;
    do
        n = ::read(report, &c, 1);
    while (n < 0 && errno == EINTR);
    if (n == 1 && c == kReady) std::_Exit(EXIT_SUCCESS);
    int ws = 0;
    while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(ws)) std::_Exit(WEXITSTATUS(ws) ? WEXITSTATUS(ws) : EXIT_FAILURE);
    std::fprintf(stderr, "%s: the background process died (signal %d)\n",
                 program_invocation_short_name, WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
    std::_Exit(EXIT_FAILURE);
}

void redirect(int from, int to) {
    if (::dup2(from, to) < 0) throw cmd::sys_failure("dup2");
}

} // namespace

Background Background::start(bool foreground) {
    // Opened now: the sandbox has no /dev.
    cmd::UniqueFd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    if (!null) throw cmd::sys_failure("open /dev/null");
    if (foreground) return Background(cmd::UniqueFd(), std::move(null), true);
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) < 0) throw cmd::sys_failure("pipe2");
    cmd::UniqueFd rd(fds[0]), wr(fds[1]);
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) throw cmd::sys_failure("fork");
    if (pid > 0) {
        wr.reset();
        wait_for_background(pid, rd.get());
    }
    rd.reset();
    if (::setsid() < 0) throw cmd::sys_failure("setsid");
    return Background(std::move(wr), std::move(null), false);
}

void Background::ready(int log_fd) {
    std::fflush(nullptr);
    redirect(null_.get(), STDIN_FILENO);
    if (!foreground_) {
        redirect(null_.get(), STDOUT_FILENO);
        redirect(log_fd >= 0 ? log_fd : null_.get(), STDERR_FILENO);
    } else if (log_fd >= 0) {
        redirect(log_fd, STDERR_FILENO);
    }
    if (report_) {
        ssize_t n;
        do
            n = ::write(report_.get(), &kReady, 1);
        while (n < 0 && errno == EINTR);
        report_.reset();
    }
    null_.reset();
}

} // namespace pasta
