// SPDX-License-Identifier: Apache-2.0

// rknp-pesto's one exchange with rknp-pasta's -c socket (exchange.hpp).
#include "exchange.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

#include "cmd/common/errors.hpp"
#include "cmd/common/monotonic.hpp"
#include "cmd/common/stream_io.hpp"
#include "cmd/common/unique_fd.hpp"

namespace pesto_cmd {

namespace {

// What a failed connect(2) means for a caller of pesto.
std::string connect_error(const std::string &socket, int err) {
    std::string what = socket + ": " + std::strerror(err);
    switch (err) {
    case ENOENT:
        return what + " (is rknp-pasta running with -c " + socket + "?)";
    case ECONNREFUSED:
        return what + " (nobody serves it: the rknp-pasta that made it is gone)";
    case EACCES:
        return what + " (the socket is mode 0600: run as rknp-pasta's user)";
    case ENOTSOCK:
        return what + " (not rknp-pasta's socket)";
    default:
        return what;
    }
}

// Waits for events on fd until the deadline; throws at it.
void wait_for(int fd, short events, long deadline, const std::string &socket) {
    for (;;) {
        long left = deadline - cmd::now_ms();
        if (left <= 0)
            throw cmd::Failure(socket + ": no reply in time");
        pollfd p{fd, events, 0};
        int r = ::poll(&p, 1, int(left));
        if (r > 0) return;
        if (r < 0 && errno != EINTR) throw cmd::sys_failure("poll");
    }
}

} // namespace

std::string exchange(const std::string &socket, const std::string &request,
                     int timeout_ms) {
    long deadline = cmd::now_ms() + timeout_ms;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (socket.empty() || socket.size() >= sizeof addr.sun_path)
        throw cmd::Failure("'" + socket + "' does not fit a socket address (1 to " +
                           std::to_string(sizeof addr.sun_path - 1) + " bytes)");
    std::memcpy(addr.sun_path, socket.c_str(), socket.size() + 1);
    cmd::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) throw cmd::sys_failure("socket");
    for (;;) {
        if (::connect(fd.get(), reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0)
            break;
        int err = errno;
        if (err == EINTR) continue;
        if (err != EAGAIN) throw cmd::Failure(connect_error(socket, err));
        // A full backlog is no answer: rknp-pasta serves 16 clients at
        // once and takes more as they leave. Again until the deadline.
        if (cmd::now_ms() >= deadline)
            throw cmd::Failure(socket + ": not accepted within " +
                               std::to_string(timeout_ms / 1000) + " s");
        ::poll(nullptr, 0, 50);
    }
    // Until sent, or the server closed: it answers a hopeless request
    // before reading it all, and its reply, if any, says why.
    std::size_t sent = 0;
    while (cmd::send_some(fd.get(), request, sent) == cmd::SendState::again)
        wait_for(fd.get(), POLLOUT, deadline, socket);
    ::shutdown(fd.get(), SHUT_WR);
    std::string reply;
    for (;;) {
        char buf[1024];
        ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
        if (n > 0) {
            reply.append(buf, std::size_t(n));
            if (reply.size() > kMaxReply)
                throw cmd::Failure(socket + ": a reply of more than " +
                                   std::to_string(kMaxReply) +
                                   " bytes (not rknp-pasta's socket)");
            continue;
        }
        if (n == 0) return reply;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            wait_for(fd.get(), POLLIN, deadline, socket);
            continue;
        }
        // The server closed with our bytes unread (it answered a hopeless
        // request early, or refused us unanswered): what came is the reply.
        if (errno == ECONNRESET) return reply;
        throw cmd::sys_failure(socket + ": recv");
    }
}

} // namespace pesto_cmd
