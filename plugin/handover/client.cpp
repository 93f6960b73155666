// SPDX-License-Identifier: Apache-2.0

// The child's end of the tap hand-over: connect, check the parent's
// greeting, send the Hello with the tap fd, return once the parent has
// acknowledged it (or throw its reason).
#include "handover/client.hpp"

#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/fd_passing.hpp"
#include "common/error.hpp"
#include "common/fd.hpp"
#include "handover/unix_socket.hpp"

namespace rknp::handover {

namespace {

using Clock = std::chrono::steady_clock;

// Milliseconds left until deadline, at least 1 (0 would mean "no wait").
int ms_left(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - Clock::now())
                    .count();
    return left < 1 ? 1 : int(left);
}

[[noreturn]] void timed_out(const std::string &what) {
    throw Error(RKNP_ERR_TIMEOUT, "hand-over: timed out " + what);
}

// A unix connect blocks while the listener's backlog is full (a listener
// that never accepts); SO_SNDTIMEO bounds that wait (EAGAIN) and the
// sendmsg's.
void connect_bounded(int s, const std::string &path, int timeout_ms) {
    sockaddr_un addr = socket_address(path);
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    if (::setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0)
        throw_errno("hand-over: SO_SNDTIMEO");
    for (;;) {
        if (::connect(s, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0)
            return;
        if (errno == EINTR) continue;
        if (errno == EAGAIN)
            timed_out("connecting to " + path + " (nobody accepts)");
        throw_errno("hand-over: connect " + path);
    }
}

// One message of at most kReplyMax bytes, waited for until deadline.
size_t receive(int s, uint8_t (&buf)[kReplyMax], Clock::time_point deadline,
               const char *what) {
    wait_readable(s, ms_left(deadline), what);
    ssize_t n = ::recv(s, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0) throw_errno("hand-over: recv");
    if (n == 0)
        protocol_error(std::string("the parent closed the connection before ") +
                       what);
    return size_t(n);
}

// Throws the parent's refusal carried by a Reply.
[[noreturn]] void refused(std::span<const uint8_t> msg) {
    Reply r = decode_reply(msg);
    if (r.status == RKNP_OK) protocol_error("acknowledged before the greeting");
    throw Error(r.status, "parent refused the tap: " + r.message);
}

} // namespace

void send_tap(const std::string &path, int tap_fd, const std::string &ifname,
              const Tokens &tokens, int timeout_ms) {
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    Hello hello = encode_hello(ifname, tokens.child);
    UniqueFd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (!s) throw_errno("hand-over: socket");
    connect_bounded(s.get(), path, timeout_ms);

    // Nothing is sent before the peer proves it is the parent: whoever
    // replaced the socket receives neither the tap nor our token.
    uint8_t buf[kReplyMax];
    size_t n = receive(s.get(), buf, deadline, "the parent's greeting");
    if (!is_greeting({buf, n})) refused({buf, n});
    if (!tokens_equal(decode_greeting({buf, n}), tokens.parent))
        throw Error(RKNP_ERR_PERMISSION,
                    "hand-over: the peer on " + path +
                        " is not this child's parent (wrong token); the tap "
                        "was not sent");

    // A parent that refuses us replies and closes before our hello lands
    // (EPIPE): its reply is still queued, so read it.
    if (send_with_fd(s.get(), hello.data(), hello.size(), tap_fd, MSG_NOSIGNAL) < 0) {
        if (errno == EAGAIN) timed_out("sending the tap to " + path);
        if (errno != EPIPE && errno != ECONNRESET)
            throw_errno("hand-over: sendmsg " + path);
    }
    n = receive(s.get(), buf, deadline, "the parent's acknowledgement");
    Reply r = decode_reply({buf, n});
    if (r.status != RKNP_OK)
        throw Error(r.status, "parent refused the tap: " + r.message);
}

} // namespace rknp::handover
