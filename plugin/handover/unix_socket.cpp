// SPDX-License-Identifier: Apache-2.0

// Address and bounded wait helpers for the hand-over socket.
#include "handover/unix_socket.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"

namespace rknp::handover {

sockaddr_un socket_address(const std::string &path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (path.empty() || path.size() >= sizeof a.sun_path)
        throw_invalid("hand-over socket path \"" + path + "\" is longer than " +
                      std::to_string(sizeof a.sun_path - 1) +
                      " bytes; use a shorter state directory");
    std::memcpy(a.sun_path, path.data(), path.size());
    return a;
}

void wait_readable(int fd, int timeout_ms, const char *what) {
    pollfd p{fd, POLLIN, 0};
    for (;;) {
        int r = ::poll(&p, 1, timeout_ms);
        if (r > 0) return;
        if (r == 0)
            throw Error(RKNP_ERR_TIMEOUT, std::string("hand-over: timed out "
                                                      "waiting for ") +
                                              what);
        if (errno != EINTR) throw_errno("hand-over: poll");
    }
}

} // namespace rknp::handover
