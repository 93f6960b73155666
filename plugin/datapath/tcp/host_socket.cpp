// SPDX-License-Identifier: Apache-2.0

// The host end of a fast-path TCP flow (tcp::HostSocket, host_socket.hpp):
// the socket's options and when each is set, and every call the flow
// makes on it, each saying why it is needed at that point.
#include "datapath/tcp/host_socket.hpp"

#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <cerrno>

#include "datapath/flows/route.hpp"

namespace rknp::tcp {

namespace {

constexpr int kOne = 1;

void set_int(int fd, int level, int opt, int v) {
    // Best effort: a missing option only costs performance.
    (void)::setsockopt(fd, level, opt, &v, sizeof v);
}

} // namespace

// The one option a socket needs before it connects: urgent data inline,
// else the kernel takes the urgent byte out of the stream and our byte
// counting (peek offset = bytes in flight) would slip; the host may send
// it the moment the connection is up. URG is never passed on in either
// direction. The other options come when they first matter, a system
// call each saved for the many short connections that never get there:
// TCP_NODELAY before the second send() (send), SO_KEEPALIVE after
// kKeepaliveAfterMs (keepalive), SO_PEEK_OFF at the first peek with bytes
// in flight (peek_past). A forward's listener has all three set once and
// its accepted sockets inherit them.
int HostSocket::prepare_listener(int fd) {
    if (::setsockopt(fd, SOL_SOCKET, SO_OOBINLINE, &kOne, sizeof kOne) < 0) return errno;
    set_int(fd, IPPROTO_TCP, TCP_NODELAY, 1);
    set_int(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
    return 0;
}

HostSocket::Connect HostSocket::connect(const sockaddr *target, socklen_t target_len,
                                        const sockaddr *bind, socklen_t bind_len) {
    *this = HostSocket{};
    fd_.reset(::socket(target->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd_) return Connect::NoSocket;
    const int fd = fd_.get();
    if (::setsockopt(fd, SOL_SOCKET, SO_OOBINLINE, &kOne, sizeof kOne) < 0 ||
        (bind != nullptr && ::bind(fd, bind, bind_len) < 0))
        return Connect::Refused;
    // Connected to itself: nothing listens on that port (a listener would
    // have kept the kernel from picking it), so the guest is refused.
    if ((::connect(fd, target, target_len) < 0 && errno != EINPROGRESS) ||
        connected_to_itself(fd, target))
        return Connect::Refused;
    return Connect::Started;
}

void HostSocket::adopt(UniqueFd fd) {
    *this = HostSocket{};
    fd_ = std::move(fd);
    nodelay_ = true; // inherited from the listener, as the other options
}

bool HostSocket::watch(const EventSource &events, uint64_t ref) {
    return events.add(fd_.get(), kEvents, ref) >= 0;
}

void HostSocket::close(bool reset_peer) {
    if (reset_peer && fd_) {
        linger l{1, 0};
        (void)::setsockopt(fd_.get(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    fd_.reset();
}

uint32_t HostSocket::path_mtu(bool loopback, uint32_t loopback_mtu) const {
    // To the host's loopback (the gateway: the most frequent short
    // connections) the path is lo, whose MTU the fast path read at start:
    // no getsockopt. Were lo's MTU changed since, the guest's segments
    // would only be of another size than lo's; the kernel splits them.
    // Elsewhere TCP_INFO's path MTU, not TCP_MAXSEG, which right after
    // connect is also bound to half the peer's first window (32 KiB over
    // loopback).
    if (loopback && loopback_mtu != 0) return loopback_mtu;
    tcp_info ti{};
    socklen_t len = sizeof ti;
    if (::getsockopt(fd_.get(), IPPROTO_TCP, TCP_INFO, &ti, &len) == 0) return ti.tcpi_pmtu;
    return 0;
}

void HostSocket::keepalive() {
    // Dead host peers of idle flows are found as before: the first probe
    // comes tcp_keepalive_time (2 h by default) after this, and a flow
    // that ends sooner never needed it.
    set_int(fd_.get(), SOL_SOCKET, SO_KEEPALIVE, 1);
}

ssize_t HostSocket::send(const uint8_t *data, size_t len, bool first) {
    if (!nodelay_ && !first) {
        // The guest's stack already decided when to push (Nagle/cork
        // happened there): a second Nagle here would only add delay. Not
        // needed before the first send(): Linux's Nagle (Minshall's
        // variant) holds a small segment only while an earlier small one
        // is unacknowledged, and autocorking only with data in flight.
        nodelay_ = true;
        set_int(fd_.get(), IPPROTO_TCP, TCP_NODELAY, 1);
    }
    ssize_t n;
    do
        n = ::send(fd_.get(), data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
        n = 0;
    }
    taken_since_ += uint32_t(n);
    if (size_t(n) < len) wnd_seen_ = 0; // refused: look again before the next ACK
    return n;
}

void HostSocket::shutdown_write() { (void)::shutdown(fd_.get(), SHUT_WR); }

uint32_t HostSocket::window(bool fresh, uint32_t cap, uint32_t fallback) {
    // Between looks the estimate only shrinks by what was sent, so the
    // window's right edge stays put and never promises more than the
    // socket had (ACKs from the host peer only free more). This saves a
    // getsockopt per guest segment of an interactive flow.
    if (!fresh && wnd_seen_ != 0 && taken_since_ < wnd_seen_ / 8)
        return wnd_seen_ - taken_since_;
    // SO_MEMINFO gives the two numbers send() is limited by: the send
    // buffer and what is queued in it (both in memory, not payload,
    // units). A quarter is kept back for per-skb overhead so that what we
    // advertise is what send() will take.
    uint32_t mem[SK_MEMINFO_VARS] = {};
    socklen_t len = sizeof mem;
    if (::getsockopt(fd_.get(), SOL_SOCKET, SO_MEMINFO, mem, &len) < 0) return fallback;
    sndbuf_ = mem[SK_MEMINFO_SNDBUF];
    uint32_t queued = mem[SK_MEMINFO_WMEM_QUEUED];
    uint64_t free = sndbuf_ > queued ? sndbuf_ - queued : 0;
    // The kernel grows a send buffer (up to tcp_wmem's maximum) only for a
    // writer it saw blocked, and we never block: the guest sends what we
    // said fits. A writability poll on a socket the kernel deems full
    // (free below half of what is queued) marks it so, as for a blocked
    // writer; the buffer then autotunes to the path, and its EPOLLOUT edge
    // reopens the window (Flow::window_check). Setting SO_SNDBUF instead
    // would lock it at 2 x net.core.wmem_max: 416 KiB on Debian, 83
    // Mbit/s at 40 ms.
    if (free < queued / 2) {
        pollfd p{fd_.get(), POLLOUT, 0};
        (void)::poll(&p, 1, 0);
    }
    wnd_seen_ = uint32_t(std::min<uint64_t>(free / 4 * 3, cap));
    taken_since_ = 0;
    return wnd_seen_;
}

ssize_t HostSocket::peek(msghdr &mh) {
    ssize_t n;
    do
        n = ::recvmsg(fd_.get(), &mh, MSG_PEEK | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    return n;
}

bool HostSocket::peek_past(uint32_t inflight) {
    // Until bytes are in flight every peek starts at the head of the
    // queue, as without SO_PEEK_OFF; from here the kernel keeps the
    // offset (a flow whose every peek finds nothing in flight, a request
    // and its answer, never sets it).
    if (peek_off_on_ || inflight == 0) return true;
    int off = int(inflight);
    if (::setsockopt(fd_.get(), SOL_SOCKET, SO_PEEK_OFF, &off, sizeof off) < 0) return false;
    peek_off_on_ = true;
    return true;
}

bool HostSocket::peek_from_head() {
    if (!peek_off_on_) return true;
    int zero = 0;
    return ::setsockopt(fd_.get(), SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof zero) == 0;
}

bool HostSocket::drop(uint32_t n) {
    // The acked bytes leave the kernel's queue only now; the peek offset
    // (Offset mode) moves back by as much, staying = bytes in flight. A
    // read ends at an urgent mark (even inline): repeat until all are gone.
    for (uint32_t left = n; left != 0;) {
        ssize_t r = ::recv(fd_.get(), nullptr, left, MSG_TRUNC | MSG_DONTWAIT);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0 || uint32_t(r) > left) return false;
        left -= uint32_t(r);
    }
    return true;
}

int64_t HostSocket::queued() const {
    int q = 0;
    return ::ioctl(fd_.get(), FIONREAD, &q) == 0 && q >= 0 ? q : -1;
}

void HostSocket::bytes_in_flight(uint32_t inflight) {
    if (rcvbuf_raised_ || inflight < kBulkInFlight) return;
    // What the guest has not acknowledged stays in the socket's receive
    // queue and takes room from the window the kernel offers the sender,
    // which starts from tcp_rmem's default (128 KiB) and grows with what
    // the reader consumes: while it is small, the bytes in flight to the
    // guest close it. Raising SO_RCVLOWAT makes the kernel grow the buffer
    // to fit that window without locking it (SO_RCVBUF would stop the
    // autotuning); the low mark goes back to 1 at once, so readiness is
    // unchanged. Capped by the kernel at half of tcp_rmem's maximum.
    rcvbuf_raised_ = true;
    set_int(fd_.get(), SOL_SOCKET, SO_RCVLOWAT, int(kRaisedWindow));
    set_int(fd_.get(), SOL_SOCKET, SO_RCVLOWAT, 1);
}

void HostSocket::ack_now() {
    // The kernel acks two full segments at once only if the reader keeps
    // the window's right edge moving ("tcp_recvmsg() will send ACK
    // otherwise"); bytes held for the guest stop it, so the ACK would wait
    // for our next read of this socket (the guest's ACK) or the
    // delayed-ACK timer. A sender limited by its send buffer, as in a
    // download over a long path, goes only as fast as its ACKs come back.
    // TCP_QUICKACK sends the one owed, if any, now.
    set_int(fd_.get(), IPPROTO_TCP, TCP_QUICKACK, 1);
}

} // namespace rknp::tcp
