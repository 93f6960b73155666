// SPDX-License-Identifier: Apache-2.0

// RLIMIT_NOFILE for a scope, and what the process has left under it: the
// control socket's accept pause and the forwards' fd reserve are tested by
// running out of fds for real.
#pragma once

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/resource.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "cmd/common/unique_fd.hpp"

// Lowers RLIMIT_NOFILE's soft limit for a scope.
class NofileLimit {
public:
    explicit NofileLimit(rlim_t soft) {
        REQUIRE(::getrlimit(RLIMIT_NOFILE, &old_) == 0);
        rlimit l = old_;
        l.rlim_cur = soft;
        REQUIRE(::setrlimit(RLIMIT_NOFILE, &l) == 0);
    }
    ~NofileLimit() { ::setrlimit(RLIMIT_NOFILE, &old_); }
    NofileLimit(const NofileLimit &) = delete;
    NofileLimit &operator=(const NofileLimit &) = delete;

private:
    rlimit old_{};
};

// The fd the next open gets.
inline int lowest_free_fd() {
    cmd::UniqueFd fd(::fcntl(0, F_DUPFD_CLOEXEC, 0));
    if (!fd) fd.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    REQUIRE(fd);
    return fd.get();
}

// The soft limit under which exactly `free` more fds can be opened (the
// open ones are what /proc/self/fd lists, less the listing's own).
inline rlim_t limit_leaving(int free) {
    std::vector<bool> open;
    std::error_code ec;
    for (const auto &e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
        size_t fd = std::stoul(e.path().filename().string());
        if (fd >= open.size()) open.resize(fd + 1);
        open[fd] = true;
    }
    REQUIRE(!ec);
    rlim_t limit = 0;
    for (int left = free; left > 0; limit++)
        if (limit >= open.size() || !open[limit] ||
            ::fcntl(int(limit), F_GETFD) < 0) // the listing's fd, closed now
            left--;
    return limit;
}
