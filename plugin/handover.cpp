#include "handover.hpp"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

#include "error.hpp"

namespace rknp::handover {

namespace {

constexpr uint8_t kHelloMagic[4] = {'R', 'K', 'N', 'H'};
constexpr uint8_t kReplyMagic[4] = {'R', 'K', 'N', 'R'};

[[noreturn]] void protocol(const std::string &msg) {
    throw Error(RKNP_ERR_PROTOCOL, "hand-over: " + msg);
}

void put16(uint8_t *p, uint16_t v) {
    p[0] = uint8_t(v);
    p[1] = uint8_t(v >> 8);
}
uint16_t get16(const uint8_t *p) { return uint16_t(p[0] | (p[1] << 8)); }
void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
uint32_t get32(const uint8_t *p) {
    return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
           uint32_t(p[3]) << 24;
}

sockaddr_un make_addr(const std::string &path) {
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
        protocol("message or control data truncated");
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

Hello encode_hello(const std::string &ifname) {
    Hello h{};
    if (ifname.empty() || ifname.size() > 15)
        throw_invalid("hand-over: interface name \"" + ifname +
                      "\" must be 1..15 bytes");
    std::memcpy(h.data(), kHelloMagic, 4);
    put16(h.data() + 4, kVersion);
    std::memcpy(h.data() + 8, ifname.data(), ifname.size());
    return h;
}

std::string decode_hello(std::span<const uint8_t> msg) {
    if (msg.size() != kHelloSize)
        protocol("hello has " + std::to_string(msg.size()) + " bytes, want " +
                 std::to_string(kHelloSize));
    if (std::memcmp(msg.data(), kHelloMagic, 4) != 0) protocol("bad magic");
    uint16_t version = get16(msg.data() + 4);
    if (version != kVersion)
        protocol("unsupported version " + std::to_string(version));
    if (get16(msg.data() + 6) != 0) protocol("reserved field is not zero");
    const uint8_t *name = msg.data() + 8;
    size_t len = 0;
    while (len < 16 && name[len] != 0) ++len;
    if (len == 0 || len == 16) protocol("interface name not terminated");
    for (size_t i = len; i < 16; ++i)
        if (name[i] != 0) protocol("garbage after interface name");
    return std::string(reinterpret_cast<const char *>(name), len);
}

std::string encode_reply(rknp_status status, const std::string &message) {
    std::string m = message.substr(0, kReplyMessageMax);
    std::string r(10 + m.size(), '\0');
    auto *p = reinterpret_cast<uint8_t *>(r.data());
    std::memcpy(p, kReplyMagic, 4);
    put32(p + 4, uint32_t(status));
    put16(p + 8, uint16_t(m.size()));
    std::memcpy(p + 10, m.data(), m.size());
    return r;
}

Reply decode_reply(std::span<const uint8_t> msg) {
    if (msg.size() < 10 || msg.size() > kReplyMax) protocol("reply size");
    if (std::memcmp(msg.data(), kReplyMagic, 4) != 0)
        protocol("bad reply magic");
    Reply r;
    r.status = rknp_status(get32(msg.data() + 4));
    size_t len = get16(msg.data() + 8);
    if (len != msg.size() - 10) protocol("reply length mismatch");
    if (r.status < RKNP_OK || r.status > RKNP_ERR_INTERNAL)
        protocol("unknown reply status " + std::to_string(r.status));
    r.message.assign(reinterpret_cast<const char *>(msg.data() + 10), len);
    return r;
}

UniqueFd listen_socket(const std::string &path) {
    sockaddr_un addr = make_addr(path);
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
        if (!a.tap) protocol("hello carried no file descriptor");
        a.vnet_hdr = check_tap(a.tap.get(), a.ifname);
        adopt(std::move(a));
        send_reply(conn.get(), RKNP_OK, "");
    } catch (const Error &e) {
        reply_and_drain(conn.get(), e.code(), e.what());
        throw;
    }
}

void send_tap(const std::string &path, int tap_fd, const std::string &ifname,
              int timeout_ms) {
    sockaddr_un addr = make_addr(path);
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
    if (n == 0) protocol("the parent closed the connection without a reply");
    Reply r = decode_reply({buf, size_t(n)});
    if (r.status != RKNP_OK)
        throw Error(r.status, "parent refused the tap: " + r.message);
}

} // namespace rknp::handover
