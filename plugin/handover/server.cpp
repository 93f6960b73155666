// The parent's end of the tap hand-over: listen, check the peer and the
// fd, reply so that a refused peer always reads why.
#include "handover/server.hpp"

#include <linux/if.h>
#include <linux/if_tun.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "handover/unix_socket.hpp"

namespace rknp::handover {

namespace {

void send_reply(int conn, rknp_status status, const std::string &message) {
    std::string r = encode_reply(status, message);
    // Best effort: the peer may already be gone.
    (void)::send(conn, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// One non-blocking recvmsg into buf. Of the fds it carried, the first is
// kept in keep (if keep is empty) and the rest are closed. Returns recvmsg's
// result; flags gets msg_flags.
ssize_t recv_message(int conn, std::span<uint8_t> buf, UniqueFd &keep,
                     int &flags) {
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    iovec iov{buf.data(), buf.size()};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control;
    mh.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(conn, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0) return n;
    for (cmsghdr *c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (!keep) keep.reset(fd);
            else ::close(fd);
        }
    }
    flags = mh.msg_flags;
    return n;
}

// Replies, then makes sure the reply reaches the peer: closing a unix socket
// with unread messages resets the peer, which then never reads the reply.
// SHUT_RD makes the peer's further sends fail with EPIPE; what it already
// sent is read and dropped (SCM_RIGHTS fds included).
void reply_and_drain(int conn, rknp_status status, const std::string &message) {
    send_reply(conn, status, message);
    (void)::shutdown(conn, SHUT_RD);
    for (;;) {
        uint8_t buf[256];
        UniqueFd dropped;
        int flags = 0;
        ssize_t n = recv_message(conn, buf, dropped, flags);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
    }
}

// Receives the Hello and at most one fd; extra fds are closed.
std::string receive_hello(int conn, UniqueFd &fd_out) {
    uint8_t buf[kHelloSize + 1];
    int flags = 0;
    ssize_t n = recv_message(conn, buf, fd_out, flags);
    if (n < 0) throw_errno("hand-over: recvmsg");
    if (flags & (MSG_TRUNC | MSG_CTRUNC))
        protocol_error("message or control data truncated");
    return decode_hello({buf, size_t(n)});
}

// Throws unless fd is a tap (IFF_TAP, IFF_NO_PI) named ifname; returns
// whether frames carry a virtio-net header.
bool check_tap(int fd, const std::string &ifname) {
    ifreq ifr{};
    if (::ioctl(fd, TUNGETIFF, &ifr) < 0)
        throw Error(RKNP_ERR_PROTOCOL,
                    "hand-over: the fd is not a tun/tap device");
    if ((ifr.ifr_flags & IFF_TAP) == 0 || (ifr.ifr_flags & IFF_NO_PI) == 0)
        throw Error(RKNP_ERR_PROTOCOL,
                    "hand-over: the fd is not a tap opened with IFF_NO_PI");
    if (ifname != ifr.ifr_name)
        throw Error(RKNP_ERR_PROTOCOL, "hand-over: the fd is tap \"" +
                                           std::string(ifr.ifr_name) +
                                           "\", not \"" + ifname + "\"");
    return (ifr.ifr_flags & IFF_VNET_HDR) != 0;
}

} // namespace

UniqueFd listen_socket(const std::string &path) {
    sockaddr_un addr = socket_address(path);
    UniqueFd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK,
                        0));
    if (!s) throw_errno("hand-over: socket");
    if (::unlink(path.c_str()) < 0 && errno != ENOENT)
        throw_errno("hand-over: remove stale " + path);
    if (::bind(s.get(), reinterpret_cast<sockaddr *>(&addr), sizeof addr) < 0)
        throw_errno("hand-over: bind " + path);
    // Only our uid may connect (the peer check is the real gate).
    if (::chmod(path.c_str(), 0600) < 0) throw_errno("hand-over: chmod " + path);
    if (::listen(s.get(), 8) < 0) throw_errno("hand-over: listen " + path);
    return s;
}

void accept_tap(int listen_fd, pid_t expected_pid, uid_t expected_uid,
                int timeout_ms, const std::function<void(Accepted &&)> &adopt) {
    UniqueFd conn(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn) throw_errno("hand-over: accept");
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        throw_errno("hand-over: SO_PEERCRED");
    if (cred.pid != expected_pid || cred.uid != expected_uid) {
        std::string why = "hand-over refused: peer pid " +
                          std::to_string(cred.pid) + " uid " +
                          std::to_string(cred.uid) + " is not the child (pid " +
                          std::to_string(expected_pid) + " uid " +
                          std::to_string(expected_uid) + ")";
        reply_and_drain(conn.get(), RKNP_ERR_PERMISSION, why);
        throw Error(RKNP_ERR_PERMISSION, why);
    }
    try {
        wait_readable(conn.get(), timeout_ms, "the child's hello");
        Accepted a;
        a.ifname = receive_hello(conn.get(), a.tap);
        if (!a.tap) protocol_error("hello carried no file descriptor");
        a.vnet_hdr = check_tap(a.tap.get(), a.ifname);
        adopt(std::move(a));
        send_reply(conn.get(), RKNP_OK, "");
    } catch (const Error &e) {
        reply_and_drain(conn.get(), e.code(), e.what());
        throw;
    }
}

} // namespace rknp::handover
