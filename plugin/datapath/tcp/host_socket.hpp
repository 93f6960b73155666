// SPDX-License-Identifier: Apache-2.0

// The host end of one fast-path TCP flow: a non-blocking kernel socket
// and what each question to it costs. Short connections are bound by the
// stack thread's system calls (docs/tcp-fast-path.md, "The cost of a new
// connection"), so this class holds the policy that keeps them few: which
// options a socket gets and when (before connect only what must be there;
// the rest when it first matters, or inherited from a forward's
// listener), the epoll mask it joins with once, the path MTU without
// TCP_INFO to the host's loopback, and the estimate of what send() will
// take, looked up (SO_MEMINFO) only when it may be stale. Flow (flow.hpp)
// decides what the connection does; it asks the socket only through here.
#pragma once

#include <sys/epoll.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

#include "common/fd.hpp"
#include "datapath/event_source.hpp"

namespace rknp::tcp {

class HostSocket {
public:
    // The events a flow's socket is watched for, from the start and never
    // changed (no EPOLL_CTL_MOD per connection): connect completion or
    // failure shows as EPOLLOUT/EPOLLERR, and edge-triggered every edge is
    // reported once, so a flow no EPOLLIN edge reached has nothing to peek.
    // EPOLLPRI: urgent data ends a peek early.
    static constexpr uint32_t kEvents = EPOLLIN | EPOLLPRI | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    // A flow with this much in flight to the guest moves bulk data: its
    // receive buffer is raised once to fit a kRaisedWindow window
    // (bytes_in_flight), room for those bytes beside what the sender
    // needs. Below one full frame at MTU 65520 (65480 bytes): while the
    // buffer is small the sender's window may let only that through a
    // round trip, and a flow that waited for more would stay at that pace.
    static constexpr uint32_t kBulkInFlight = 32 * 1024;
    static constexpr uint32_t kRaisedWindow = 1024 * 1024;
    // A guest flow's socket gets SO_KEEPALIVE once it has lived this long
    // (keepalive): most connections end sooner and never need it.
    static constexpr int64_t kKeepaliveAfterMs = 10000;

    // The options every flow's socket wants, set once on a forward's
    // listening socket: accepted sockets inherit them, none is set per
    // connection. 0 or an errno (only SO_OOBINLINE's failure counts).
    static int prepare_listener(int fd);

    enum class Connect : uint8_t {
        Started,   // connect() in progress (or done): watch() next
        NoSocket,  // socket() failed: out of fds or memory
        Refused,   // an option, bind or connect failed, or it connected
                   // to itself (nothing listens there)
    };
    // A new socket of target's family, bound to bind if not null.
    Connect connect(const sockaddr *target, socklen_t target_len, const sockaddr *bind,
                    socklen_t bind_len);
    // A socket accepted on a forward's listener (prepare_listener).
    void adopt(UniqueFd fd);
    // Joins the epoll set with kEvents (false: refused, ENOMEM/ENOSPC).
    bool watch(const EventSource &events, uint64_t ref);
    // Closes it (which leaves the epoll set); with reset_peer the host
    // peer gets an RST (SO_LINGER 0) instead of a FIN.
    void close(bool reset_peer);
    explicit operator bool() const { return bool(fd_); }

    // The path MTU: lo's (read when the fast path started, 0 if unknown)
    // for a connection to the host's loopback, else TCP_INFO's; 0 unknown.
    uint32_t path_mtu(bool loopback, uint32_t loopback_mtu) const;
    // SO_KEEPALIVE, once the flow lived kKeepaliveAfterMs.
    void keepalive();

    // Guest data into the socket: what it took (0 if full), -1 on a
    // fatal error. first: the flow's first send, which needs no
    // TCP_NODELAY yet.
    ssize_t send(const uint8_t *data, size_t len, bool first);
    void shutdown_write();
    // What the socket will take now: looked up (SO_MEMINFO) when fresh,
    // after a refused send, or once the socket took an eighth of the last
    // look's window; in between that window less what it took since.
    // cap: the most the guest's window field can say; fallback: what to
    // say if the kernel does not answer.
    uint32_t window(bool fresh, uint32_t cap, uint32_t fallback);
    // The send buffer at the last look (0 before any).
    uint32_t sndbuf() const { return sndbuf_; }

    // Host data: a peek (MSG_PEEK, EINTR retried), n < 0 with errno set.
    ssize_t peek(msghdr &mh);
    // Offset mode (peek_mode.hpp), before a peek with inflight bytes in
    // flight: SO_PEEK_OFF past them if not on yet. False: refused.
    bool peek_past(uint32_t inflight);
    // Offset mode: the next peek from the head of the queue again
    // (a rewind; a no-op while SO_PEEK_OFF was never set). False: refused.
    bool peek_from_head();
    // The guest acked n bytes: they leave the receive queue (false: the
    // queue did not hold them, or an error).
    bool drop(uint32_t n);
    // What the receive queue holds (FIONREAD: no FIN, urgent bytes
    // inline); -1 if the kernel does not say.
    int64_t queued() const;
    // After data went out to the guest: a bulk flow's buffer is raised.
    void bytes_in_flight(uint32_t inflight);
    // The ACK the kernel holds back while we keep bytes unread, sent now.
    void ack_now();

private:
    UniqueFd fd_;
    bool nodelay_ = false;       // TCP_NODELAY set (or inherited)
    bool peek_off_on_ = false;   // SO_PEEK_OFF set (peek_past)
    bool rcvbuf_raised_ = false; // bytes_in_flight raised it
    uint32_t sndbuf_ = 0;        // send buffer at the last look
    uint32_t wnd_seen_ = 0;      // the window that look gave
    uint32_t taken_since_ = 0;   // bytes the socket took after that look
};

} // namespace rknp::tcp
