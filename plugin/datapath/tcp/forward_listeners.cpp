// SPDX-License-Identifier: Apache-2.0

// The fast path's forwarded TCP ports: listeners in its epoll set, each
// accepted connection opened towards the guest as a flow, bounded by its
// forward's cap and rate and all forwards' slots, never by the guest's
// admission; or, for a loopback client of a forward that asked for it
// (RKNP_FORWARD_HANDOFF_LOOPBACK), handed to the caller.
#include "datapath/tcp/fastpath.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "common/addr.hpp"
#include "common/fd_passing.hpp"

namespace rknp::tcp {

int FastPath::add_forward(const sockaddr *host, socklen_t host_len, uint32_t guest4,
                          uint16_t guest_port) {
    uint8_t guest[16];
    map_v4(ipv4_bytes(guest4).data(), guest);
    return add_forward(host, host_len, guest, false, guest_port);
}

void FastPath::add_forward(const ForwardSpec &f) { add_socket_forward(*this, f, f.handoff); }

int FastPath::add_forward(const sockaddr *host, socklen_t host_len, const uint8_t guest[16],
                          bool v6, uint16_t guest_port,
                          std::shared_ptr<const UniqueFd> handoff) {
    if (host_len > socklen_t(sizeof(sockaddr_storage))) return EINVAL;
    UniqueFd fd(::socket(host->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) return errno;
    int one = 1;
    // "::" must not also claim the IPv4 port: that is a forward of its own.
    if (host->sa_family == AF_INET6 &&
        ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0)
        return errno;
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0) return errno;
    // Accepted sockets inherit the options every flow's socket wants.
    if (int e = HostSocket::prepare_listener(fd.get()); e != 0) return e;
    if (::bind(fd.get(), host, host_len) < 0 || ::listen(fd.get(), SOMAXCONN) < 0)
        return errno;
    size_t slot = 0;
    while (slot < fwds_.size() && fwds_[slot].fd) ++slot;
    if (slot == fwds_.size()) fwds_.emplace_back();
    // Level-triggered: a bounded accept batch per round.
    if (events_.add(fd.get(), EPOLLIN, kListenerTag | slot) < 0) return errno;
    ForwardListener &l = fwds_[slot];
    l.fd = std::move(fd);
    std::memset(&l.host, 0, sizeof l.host);
    std::memcpy(&l.host, host, host_len);
    l.host_len = host_len;
    std::memcpy(l.guest, guest, 16);
    l.v6 = v6;
    l.guest_port = guest_port;
    l.paused = false;
    l.live = 0;
    l.bucket = TokenBucket(cfg_.forward_new_per_sec, uint64_t(now()));
    l.handoff = std::move(handoff);
    return 0;
}

namespace {

// Closes a host connection with an RST rather than a FIN: the client must
// not take a refused connection for an empty reply.
void reset_close(UniqueFd &fd) {
    linger l{1, 0};
    (void)::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
    fd.reset();
}

// 127.0.0.0/8 or ::1 (an IPv6 listener is IPV6_V6ONLY: no mapped peer).
bool loopback_peer(const sockaddr_storage &peer) {
    if (peer.ss_family == AF_INET)
        return (ntohl(reinterpret_cast<const sockaddr_in &>(peer).sin_addr.s_addr) >> 24) ==
               127;
    return peer.ss_family == AF_INET6 &&
           IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6 &>(peer).sin6_addr);
}

} // namespace

bool FastPath::remove_forward(const sockaddr *host, socklen_t host_len) {
    for (size_t slot = 0; slot < fwds_.size(); ++slot) {
        ForwardListener &l = fwds_[slot];
        if (l.fd && same_ip_port(l.host, host, host_len)) {
            l.fd.reset(); // also leaves the epoll set; connections pending
                          // in its backlog are reset by the kernel
            l.handoff.reset();
            // Its connections go on, still in the forwards' slots, no
            // longer in its count (a forward added later may take the
            // entry).
            for (size_t i = 0; i < fwd_of_.size() && l.live != 0; ++i) {
                if (fwd_of_[i] != int32_t(slot)) continue;
                fwd_of_[i] = kForwardGone;
                --l.live;
            }
            return true;
        }
    }
    return false;
}

size_t FastPath::forwards() const {
    size_t n = 0;
    for (const ForwardListener &l : fwds_) n += l.fd ? 1 : 0;
    return n;
}

void FastPath::accept_forward(size_t slot) {
    if (slot >= fwds_.size() || !fwds_[slot].fd) return;
    for (int i = 0; i < kAcceptBudget; ++i) {
        sockaddr_storage peer{};
        socklen_t len = sizeof peer;
        int s = ::accept4(fwds_[slot].fd.get(), reinterpret_cast<sockaddr *>(&peer), &len,
                          SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (s < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                pause_listener(slot);
            return; // EAGAIN
        }
        ++stats_.forward_accepted;
        if (fwds_[slot].handoff && loopback_peer(peer))
            hand_off(slot, UniqueFd(s));
        else
            open_forwarded(slot, UniqueFd(s), peer);
    }
}

void FastPath::pause_listener(size_t slot) {
    ForwardListener &l = fwds_[slot];
    (void)events_.modify(l.fd.get(), 0, kListenerTag | slot); // no events
    l.paused = true;
    ++stats_.accept_paused;
    if (listeners_resume_at_ < 0) listeners_resume_at_ = now() + kAcceptPauseMs;
}

void FastPath::resume_listeners() {
    listeners_resume_at_ = -1;
    for (size_t slot = 0; slot < fwds_.size(); ++slot) {
        ForwardListener &l = fwds_[slot];
        if (!l.paused) continue;
        l.paused = false;
        if (!l.fd) continue;
        (void)events_.modify(l.fd.get(), EPOLLIN, kListenerTag | slot);
    }
}

void FastPath::hand_off(size_t slot, UniqueFd sock) {
    ForwardListener &l = fwds_[slot];
    rknp_handoff m{};
    m.struct_size = sizeof m;
    m.guest_port = l.guest_port;
    // Never waits: a caller that does not keep up (its queue full) or is
    // gone costs its client a reset, not the stack a stall.
    if (send_with_fd(l.handoff->get(), &m, sizeof m, sock.get(), MSG_DONTWAIT | MSG_NOSIGNAL) ==
        ssize_t(sizeof m))
        return; // the caller holds its own reference now; ours closes
    ++stats_.forward_refused;
    reset_close(sock);
}

uint32_t FastPath::forwarded_source(const sockaddr_storage &peer) const {
    return rknp::forwarded_source(cfg_, peer);
}

void FastPath::open_forwarded(size_t fwd, UniqueFd sock, const sockaddr_storage &peer) {
    ForwardListener &l = fwds_[fwd];
    Endpoints ep;
    ep.v6 = l.v6;
    if (guest_mac_known_) std::memcpy(ep.guest_mac, guest_mac_, 6);
    std::memcpy(ep.guest, l.guest, 16);
    if (l.v6) {
        forwarded_source6(cfg_, peer, ep.remote);
        gateway_mac6(ep.remote, ep.gw_mac); // as for a guest flow to it
    } else {
        gateway_mac4(ipv4_bytes(cfg_.gateway4).data(), ep.gw_mac);
        map_v4(ipv4_bytes(forwarded_source(peer)).data(), ep.remote);
    }
    ep.guest_port = l.guest_port;
    ep.remote_port = peer.ss_family == AF_INET6
                         ? ntohs(reinterpret_cast<const sockaddr_in6 &>(peer).sin6_port)
                         : ntohs(reinterpret_cast<const sockaddr_in &>(peer).sin_port);
    const uint64_t h = table_.hash(ep.guest, ep.remote, ep.guest_port, ep.remote_port, ep.v6);
    // The 4-tuple taken by a flow the guest opened (two host peers can
    // only clash after the gateway translation). Then the forward's own
    // bounds, never the guest's admission: its connections, all forwards'
    // (slots beyond the guest's max_flows, which also keep fds free), and
    // its rate. Refused, the client gets an RST at once: an accepted
    // connection cannot wait for a retransmission.
    std::optional<uint32_t> slot;
    if (!table_.find(ep.guest, ep.remote, ep.guest_port, ep.remote_port, ep.v6, h)) {
        if (l.live >= std::max<size_t>(cfg_.forward_flows_each, 1) ||
            forwarded_open_ >= cfg_.forward_flows)
            ++stats_.forward_full;
        else if (!l.bucket.take(uint64_t(now())))
            ++stats_.forward_rate_limited;
        else if (!(slot = table_.reserve()))
            ++stats_.forward_full; // the guest's flows in every slot (no admission)
    }
    if (!slot) {
        ++stats_.forward_refused;
        reset_close(sock);
        return;
    }
    const uint32_t idx = *slot;
    FlowContext c = ctx(now());
    table_[idx].open_accepted(c, std::move(sock), ep, table_.ref(idx), isn_for(h));
    if (table_[idx].closed()) {
        ++stats_.forward_refused;
        table_.unreserve(idx);
        return;
    }
    table_.insert(idx, h);
    fwd_of_[idx] = int32_t(fwd);
    ++l.live;
    ++forwarded_open_;
    ++stats_.flows_opened;
    settle(c, idx);
}

} // namespace rknp::tcp
