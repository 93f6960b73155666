// The child's end of the tap hand-over: connect, send the Hello with the
// tap fd, return once the parent has acknowledged it (or throw its reason).
#include "handover/client.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "common/fd.hpp"
#include "handover/messages.hpp"
#include "handover/unix_socket.hpp"

namespace rknp::handover {

void send_tap(const std::string &path, int tap_fd, const std::string &ifname,
              int timeout_ms) {
    sockaddr_un addr = socket_address(path);
    Hello hello = encode_hello(ifname);
    UniqueFd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (!s) throw_errno("hand-over: socket");
    if (::connect(s.get(), reinterpret_cast<sockaddr *>(&addr), sizeof addr) < 0)
        throw_errno("hand-over: connect " + path);
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    iovec iov{hello.data(), hello.size()};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control;
    mh.msg_controllen = sizeof control;
    cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &tap_fd, sizeof tap_fd);
    // A parent that refuses us at accept time replies and closes before
    // our hello lands (EPIPE): its reply is still queued, so read it.
    if (::sendmsg(s.get(), &mh, MSG_NOSIGNAL) < 0 && errno != EPIPE &&
        errno != ECONNRESET)
        throw_errno("hand-over: sendmsg " + path);
    wait_readable(s.get(), timeout_ms, "the parent's acknowledgement");
    uint8_t buf[kReplyMax];
    ssize_t n = ::recv(s.get(), buf, sizeof buf, 0);
    if (n < 0) throw_errno("hand-over: recv");
    if (n == 0) protocol_error("the parent closed the connection without a reply");
    Reply r = decode_reply({buf, size_t(n)});
    if (r.status != RKNP_OK)
        throw Error(r.status, "parent refused the tap: " + r.message);
}

} // namespace rknp::handover
