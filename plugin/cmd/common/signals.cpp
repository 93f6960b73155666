// SPDX-License-Identifier: Apache-2.0

// The commands' stop signals (see signals.hpp).
#include "signals.hpp"

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "errors.hpp"

namespace cmd {

UniqueFd block_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &set, nullptr) < 0) throw sys_failure("sigprocmask");
    UniqueFd fd(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
    if (!fd) throw sys_failure("signalfd");
    ::signal(SIGPIPE, SIG_IGN);
    return fd;
}

int read_signal(int sigfd) {
    signalfd_siginfo si{};
    if (::read(sigfd, &si, sizeof si) != ssize_t(sizeof si)) return 0;
    return int(si.ssi_signo);
}

} // namespace cmd
