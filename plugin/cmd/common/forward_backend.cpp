// SPDX-License-Identifier: Apache-2.0

// Where a control socket's port forwards go, and the fd reserve
// (forward_backend.hpp).
#include "forward_backend.hpp"

#include <fcntl.h>
#include <sys/eventfd.h>

#include <vector>

#include "rknp_handle.hpp"
#include "unique_fd.hpp"

namespace cmd {

bool RknpForwards::add(const rknp_forward &f, uint32_t &id, std::string &error) {
    rknp_error *err = nullptr;
    rknp_status st = rknp_parent_add_forward(parent_, &f, &id, &err);
    ErrorPtr owned(err);
    if (st == RKNP_OK) return true;
    error = rknp_error_message(owned.get());
    return false;
}

bool RknpForwards::remove(uint32_t id, std::string &error) {
    rknp_error *err = nullptr;
    rknp_status st = rknp_parent_remove_forward(parent_, id, &err);
    ErrorPtr owned(err);
    if (st == RKNP_OK) return true;
    error = rknp_error_message(owned.get());
    return false;
}

// Counting entries of /proc/self/fd would need /proc, which the sandbox
// has not; the highest fd says nothing about the holes below it. Opening
// them is the one measure that is exact everywhere: an eventfd and dups
// of it (dups take no system-wide file), all closed before returning.
int spare_fds(int want) {
    if (want <= 0) return 0;
    std::vector<UniqueFd> held;
    held.reserve(std::size_t(want));
    held.emplace_back(::eventfd(0, EFD_CLOEXEC));
    if (!held.back()) return 0;
    while (int(held.size()) < want) {
        UniqueFd fd(::fcntl(held.front().get(), F_DUPFD_CLOEXEC, 0));
        if (!fd) break;
        held.push_back(std::move(fd));
    }
    return int(held.size());
}

} // namespace cmd
