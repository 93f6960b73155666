// SPDX-License-Identifier: Apache-2.0

// The parent's end of the tap hand-over: a checked state directory, the
// listening socket, and the non-blocking server that checks peers, tokens
// and the fd and replies so that a refused peer always reads why.
#include "handover/server.hpp"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <optional>

#include "common/fd_passing.hpp"
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
    return recv_with_fd(conn, buf.data(), buf.size(), keep, flags, MSG_DONTWAIT);
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

// Receives the Hello and at most one fd; extra fds are closed. Empty if
// there was no message after all.
std::optional<DecodedHello> receive_hello(int conn, UniqueFd &fd_out) {
    uint8_t buf[kHelloSize + 1];
    int flags = 0;
    ssize_t n;
    do n = recv_message(conn, buf, fd_out, flags);
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN) return std::nullopt;
    // A peer that closes without reading our greeting leaves ECONNRESET
    // (unread data) rather than an end of file: the same hang-up.
    if (n == 0 || (n < 0 && errno == ECONNRESET))
        protocol_error("the peer hung up before its hello");
    if (n < 0) throw_errno("hand-over: recvmsg");
    if (flags & (MSG_TRUNC | MSG_CTRUNC))
        protocol_error("message or control data truncated");
    return decode_hello({buf, size_t(n)});
}

std::string octal(mode_t m) {
    char b[8];
    std::snprintf(b, sizeof b, "%04o", unsigned(m & 07777));
    return b;
}

// The state directory as an O_PATH fd, after checking that nobody but us
// can add, remove or rename entries in it.
UniqueFd open_state_dir(const std::string &dir) {
    // O_NOFOLLOW: a symlink planted in place of the directory is refused,
    // not followed to wherever it points.
    UniqueFd fd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) throw_errno("hand-over: state directory " + dir);
    struct stat st {};
    if (::fstat(fd.get(), &st) < 0) throw_errno("hand-over: fstat " + dir);
    if (st.st_uid != ::geteuid())
        throw Error(RKNP_ERR_PERMISSION,
                    "hand-over: state directory " + dir + " is owned by uid " +
                        std::to_string(st.st_uid) + " (mode " +
                        octal(st.st_mode) + "), not by this process's uid " +
                        std::to_string(::geteuid()) + "; refusing it");
    // Group or others able to write could replace the socket. Readable is
    // fine: rootlesskit makes --state-dir directories 0755 (MkdirAll), its
    // own temporary ones 0700, and the socket itself is 0600.
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        throw Error(RKNP_ERR_PERMISSION,
                    "hand-over: state directory " + dir + " (owner uid " +
                        std::to_string(st.st_uid) + ") has mode " +
                        octal(st.st_mode) +
                        ": group or others may write to it; refusing it");
    return fd;
}

// /dev/net/tun: the misc character device 10:200 (the kernel's
// Documentation/admin-guide/devices.txt); every tun/tap fd is one of it.
constexpr unsigned kTunMajor = 10;
constexpr unsigned kTunMinor = 200;

// Whether fd is /dev/net/tun's character device, asked without waiting on
// anyone: AT_STATX_DONT_SYNC takes what the kernel has cached, where a plain
// fstat of a FUSE file may ask its server first. Falls back to fstat where
// statx is missing or filtered (old kernels, container seccomp profiles).
bool is_tun_device(int fd) {
    struct statx stx {};
    if (::statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE, &stx) == 0)
        return S_ISCHR(stx.stx_mode) && stx.stx_rdev_major == kTunMajor &&
               stx.stx_rdev_minor == kTunMinor;
    if (errno != ENOSYS && errno != EPERM) return false;
    struct stat st {};
    return ::fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) &&
           major(st.st_rdev) == kTunMajor && minor(st.st_rdev) == kTunMinor;
}

// Throws unless fd is a tap (IFF_TAP, IFF_NO_PI) named ifname; returns
// whether frames carry a virtio-net header.
bool check_tap(int fd, const std::string &ifname) {
    // The device first, the ioctl only then: an ioctl runs whatever the
    // fd's driver does with it, and a FUSE or CUSE file's is served by
    // another process that may never answer, which would hold up the stack
    // thread (and every guest) for good.
    if (!is_tun_device(fd))
        throw Error(RKNP_ERR_PROTOCOL,
                    "hand-over: the fd is not a tun/tap device");
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

UniqueFd listen_socket(const std::string &state_dir, const std::string &name) {
    // The path the child connects to must fit a sockaddr_un.
    (void)socket_address(state_dir + "/" + name);
    UniqueFd dir = open_state_dir(state_dir);
    UniqueFd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK,
                        0));
    if (!s) throw_errno("hand-over: socket");
    // Linux's bind gives the new socket file the mode of the socket's own
    // inode (minus the umask): set before bind, the file is 0600 from the
    // moment it exists, with no chmod by path afterwards (which would
    // follow a symlink swapped in meanwhile). The peer check is the real
    // gate; this keeps other users from even connecting.
    if (::fchmod(s.get(), 0600) < 0) throw_errno("hand-over: fchmod socket");
    if (::unlinkat(dir.get(), name.c_str(), 0) < 0 && errno != ENOENT)
        throw_errno("hand-over: remove stale " + state_dir + "/" + name);
    // Bound through the checked directory's fd where /proc is mounted, so
    // the socket lands in the directory that was checked even if a path
    // component changed since. Where it is not (rknp-slirp4netns's
    // sandbox: a private mount namespace nobody else can change), by path.
    std::string via_fd =
        "/proc/self/fd/" + std::to_string(dir.get()) + "/" + name;
    sockaddr_un addr = socket_address(
        ::access("/proc/self/fd", F_OK) == 0 ? via_fd : state_dir + "/" + name);
    if (::bind(s.get(), reinterpret_cast<sockaddr *>(&addr), sizeof addr) < 0)
        throw_errno("hand-over: bind " + state_dir + "/" + name);
    if (::listen(s.get(), 8) < 0) throw_errno("hand-over: listen " + state_dir);
    return s;
}

Server::Server(UniqueFd listen_fd, pid_t expected_pid, uid_t expected_uid,
               const Tokens &tokens, int hello_timeout_ms)
    : listen_(std::move(listen_fd)), expected_pid_(expected_pid),
      expected_uid_(expected_uid), tokens_(tokens),
      hello_timeout_ms_(hello_timeout_ms) {}

int64_t Server::ms_until_deadline(int64_t now_ms) const {
    int64_t next = -1;
    for (const auto &p : pending_) {
        int64_t left = std::max<int64_t>(0, p.deadline_ms - now_ms);
        if (next < 0 || left < next) next = left;
    }
    return next;
}

void Server::accept_one(int64_t now_ms) {
    UniqueFd conn(::accept4(listen_.get(), nullptr, nullptr,
                            SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!conn) {
        if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) return;
        throw_errno("hand-over: accept");
    }
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        throw_errno("hand-over: SO_PEERCRED");
    if (cred.pid != expected_pid_ || cred.uid != expected_uid_) {
        std::string why = "hand-over refused: peer pid " +
                          std::to_string(cred.pid) + " uid " +
                          std::to_string(cred.uid) + " is not the child (pid " +
                          std::to_string(expected_pid_) + " uid " +
                          std::to_string(expected_uid_) + ")";
        reply_and_drain(conn.get(), RKNP_ERR_PERMISSION, why);
        throw Error(RKNP_ERR_PERMISSION, why);
    }
    if (pending_.size() >= kMaxPending) {
        std::string why = "hand-over refused: " + std::to_string(kMaxPending) +
                          " connections already wait for their hello";
        reply_and_drain(conn.get(), RKNP_ERR_PERMISSION, why);
        throw Error(RKNP_ERR_PERMISSION, why);
    }
    // Only a peer with the child's pid ever learns the parent token.
    Greeting g = encode_greeting(tokens_.parent);
    if (::send(conn.get(), g.data(), g.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
        ssize_t(g.size())) {
        if (errno == EPIPE || errno == ECONNRESET)
            protocol_error("the peer hung up before its hello");
        throw_errno("hand-over: send greeting");
    }
    pending_.push_back({std::move(conn), now_ms + hello_timeout_ms_});
}

void Server::receive(int fd, const std::function<void(Accepted &&)> &adopt) {
    auto it = std::find_if(pending_.begin(), pending_.end(),
                           [fd](const Pending &p) { return p.conn.get() == fd; });
    if (it == pending_.end()) return;
    UniqueFd conn = std::move(it->conn);
    int64_t deadline = it->deadline_ms;
    pending_.erase(it);
    try {
        Accepted a;
        UniqueFd fd_received;
        std::optional<DecodedHello> hello =
            receive_hello(conn.get(), fd_received);
        if (!hello) { // woken without a message: keep waiting
            pending_.push_back({std::move(conn), deadline});
            return;
        }
        if (!tokens_equal(hello->token, tokens_.child))
            throw Error(RKNP_ERR_PERMISSION,
                        "hand-over refused: the peer did not prove it is the "
                        "child (wrong token)");
        a.tap = std::move(fd_received);
        a.ifname = hello->ifname;
        if (!a.tap) protocol_error("hello carried no file descriptor");
        a.vnet_hdr = check_tap(a.tap.get(), a.ifname);
        adopt(std::move(a));
        send_reply(conn.get(), RKNP_OK, "");
    } catch (const Error &e) {
        reply_and_drain(conn.get(), e.code(), e.what());
        throw;
    }
    // One tap per parent: stop listening; whoever else waits is told.
    listen_.reset();
    for (auto &p : pending_)
        reply_and_drain(p.conn.get(), RKNP_ERR_STATE,
                        "hand-over refused: the tap is already attached");
    pending_.clear();
}

std::vector<std::string> Server::expire(int64_t now_ms) {
    std::vector<std::string> expired;
    for (auto it = pending_.begin(); it != pending_.end();) {
        if (it->deadline_ms > now_ms) {
            ++it;
            continue;
        }
        std::string why = "hand-over: timed out waiting for the child's hello";
        reply_and_drain(it->conn.get(), RKNP_ERR_TIMEOUT, why);
        expired.push_back(std::move(why));
        it = pending_.erase(it);
    }
    return expired;
}

} // namespace rknp::handover
