// SPDX-License-Identifier: Apache-2.0

// Writing to a non-blocking stream socket: as much as it takes now, and
// whether the rest must wait or the peer is gone. The control socket's
// replies and rknp-pesto's requests both go out this way.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <string_view>

namespace cmd {

enum class SendState {
    done,  // every byte sent
    again, // the socket is full: wait for POLLOUT
    gone,  // the peer closed or reset (no SIGPIPE: MSG_NOSIGNAL)
};

// Sends data from `sent` on, advancing it.
inline SendState send_some(int fd, std::string_view data, std::size_t &sent) {
    while (sent < data.size()) {
        ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += std::size_t(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return SendState::again;
        return SendState::gone;
    }
    return SendState::done;
}

} // namespace cmd
