// SPDX-License-Identifier: Apache-2.0

// When to stop (see target_watch.hpp).
#include "target_watch.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "errors.hpp"

namespace cmd {

TargetWatch::TargetWatch(pid_t pid, const std::optional<std::string> &netns_path,
                         bool quit) {
    if (netns_path) {
        if (!quit) return;
        const std::string &path = *netns_path;
        size_t slash = path.rfind('/');
        std::string dir(".");
        name_ = path;
        if (slash != std::string::npos) {
            dir.assign(path, 0, slash == 0 ? 1 : slash);
            name_.assign(path, slash + 1, std::string::npos);
        }
        dir_.reset(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
        if (!dir_) throw sys_failure("open " + dir);
        struct stat st{};
        if (::fstatat(dir_.get(), name_.c_str(), &st, 0) < 0)
            throw sys_failure("stat " + *netns_path);
        dev_ = st.st_dev;
        ino_ = st.st_ino;
        return;
    }
    pid_ = pid;
#ifdef SYS_pidfd_open
    pidfd_.reset(int(::syscall(SYS_pidfd_open, pid, 0)));
#endif
    // No pidfd (Linux < 5.3): gone() asks kill(pid, 0) every tick.
}

bool TargetWatch::gone() const {
    if (dir_) {
        struct stat st{};
        return ::fstatat(dir_.get(), name_.c_str(), &st, 0) < 0 ||
               st.st_dev != dev_ || st.st_ino != ino_;
    }
    if (pidfd_) {
        pollfd p{pidfd_.get(), POLLIN, 0};
        return ::poll(&p, 1, 0) > 0;
    }
    return pid_ > 0 && ::kill(pid_, 0) < 0 && errno == ESRCH;
}

} // namespace cmd
