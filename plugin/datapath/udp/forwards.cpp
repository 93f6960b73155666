// SPDX-License-Identifier: Apache-2.0

// The UDP fast path's forwarded ports (udp::Forwards, forwards.hpp): their
// sockets, each client a flow towards the guest in the forwards' own pool,
// the client's port as the guest sees it, the guest's MAC those flows need.
#include "datapath/udp/forwards.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/addr.hpp"
#include "common/hash.hpp"

namespace rknp::udp {

namespace {

uint16_t client_port(const ClientAddr &c) {
    return ntohs(c.sa.sa_family == AF_INET6 ? c.v6.sin6_port : c.v4.sin_port);
}

bool is_wildcard(const sockaddr *host) {
    if (host->sa_family == AF_INET)
        return reinterpret_cast<const sockaddr_in *>(host)->sin_addr.s_addr == htonl(INADDR_ANY);
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6 *>(host)->sin6_addr);
}

// What a forward's datagram says beside its bytes: the segment size of a
// coalesced read (len if none) and the address it was sent to.
struct Received {
    size_t seg;
    ReplySource to;
};

Received read_cmsgs(msghdr &m, size_t len) {
    Received r{len, {}};
    for (cmsghdr *c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO &&
            c->cmsg_len >= CMSG_LEN(sizeof(int))) {
            int g;
            std::memcpy(&g, CMSG_DATA(c), sizeof g);
            if (g > 0) r.seg = size_t(g);
        } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO &&
                   c->cmsg_len >= CMSG_LEN(sizeof(in_pktinfo))) {
            in_pktinfo pi;
            std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
            // The local address the kernel would answer from, a unicast
            // one even for a datagram to a broadcast address.
            r.to.family = AF_INET;
            r.to.v4 = pi.ipi_spec_dst;
        } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO &&
                   c->cmsg_len >= CMSG_LEN(sizeof(in6_pktinfo))) {
            in6_pktinfo pi;
            std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
            if (IN6_IS_ADDR_MULTICAST(&pi.ipi6_addr)) continue; // no source to answer from
            r.to.family = AF_INET6;
            r.to.v6.ipi6_addr = pi.ipi6_addr;
            r.to.v6.ipi6_ifindex = IN6_IS_ADDR_LINKLOCAL(&pi.ipi6_addr) ? pi.ipi6_ifindex : 0;
        }
    }
    return r;
}

// ARP requests while the guest's MAC is unknown: at most one this often.
constexpr int64_t kArpIntervalMs = 1000;
// Ports tried for a client whose own is taken towards the guest, beyond
// its own: with the pool at most a few thousand clients, 8 draws all
// taken is as good as never.
constexpr int kPortDraws = 8;

} // namespace

Forwards::Forwards(const FastPathConfig &cfg, const EventSource &events, GuestSink &guest,
                   const FlowTable<Flow> &guest_flows, ReadBuffers &rx, FastPathStats &stats,
                   Carrier &carrier, uint64_t port_seed)
    : cfg_(cfg), events_(events), guest_(guest), guest_flows_(guest_flows), rx_(rx),
      stats_(stats), carrier_(carrier),
      clients_(cfg.forward_clients, cfg.forward_clients_each, cfg.forward_new_per_sec,
               random_flow_seeds()[0]),
      port_seed_(port_seed) {}

int Forwards::add(const sockaddr *host, socklen_t host_len, const uint8_t guest[16], bool v6,
                  uint16_t guest_port) {
    if (host_len > socklen_t(sizeof(sockaddr_storage)) ||
        (host->sa_family != AF_INET && host->sa_family != AF_INET6))
        return EINVAL;
    UniqueFd fd(::socket(host->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) return errno;
    const int one = 1;
    // "::" must not also claim the IPv4 port: that is a forward of its own.
    // No SO_REUSEADDR: for UDP it would let any other socket with it bind
    // the same port (and take datagrams), and hide EADDRINUSE.
    if (host->sa_family == AF_INET6 &&
        ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0)
        return errno;
    if (::bind(fd.get(), host, host_len) < 0) return errno;
    // On a wildcard address every datagram says which of the host's
    // addresses it was sent to, for the replies' source.
    const bool wildcard = is_wildcard(host);
    if (wildcard &&
        (host->sa_family == AF_INET
             ? ::setsockopt(fd.get(), IPPROTO_IP, IP_PKTINFO, &one, sizeof one)
             : ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof one)) < 0)
        return errno;
    // Several datagrams of one client per read when they come in a burst.
    if (cfg_.segmentation) (void)::setsockopt(fd.get(), SOL_UDP, UDP_GRO, &one, sizeof one);
    (void)::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &kHostRcvBuf, sizeof kHostRcvBuf);
    size_t slot = 0;
    while (slot < fwds_.size() && fwds_[slot].fd) ++slot;
    if (slot == fwds_.size()) fwds_.emplace_back();
    // Level-triggered: one batch per forward and round.
    if (events_.add(fd.get(), EPOLLIN, kEventTag | slot) < 0) return errno;
    clients_.open_forward(slot, clock_ms(cfg_));
    Forward &f = fwds_[slot];
    f.fd = std::move(fd);
    f.wildcard = wildcard;
    std::memset(&f.host, 0, sizeof f.host);
    std::memcpy(&f.host, host, host_len);
    f.host_len = host_len;
    std::memcpy(f.guest, guest, 16);
    f.v6 = v6;
    f.guest_port = guest_port;
    return 0;
}

bool Forwards::remove(const sockaddr *host, socklen_t host_len) {
    for (size_t slot = 0; slot < fwds_.size(); ++slot) {
        Forward &f = fwds_[slot];
        if (!f.fd || !same_ip_port(f.host, host, host_len)) continue;
        close_forward_flows(slot);
        f.fd.reset(); // leaves the epoll set with it
        return true;
    }
    return false;
}

size_t Forwards::forwards() const {
    size_t n = 0;
    for (const Forward &f : fwds_) n += f.fd ? 1 : 0;
    return n;
}

void Forwards::close_client(uint32_t idx) {
    carrier_.closing(clients_[idx]);
    clients_.remove(idx);
}

void Forwards::close_forward_flows(size_t slot) {
    while (std::optional<uint32_t> c = clients_.any_of(slot)) close_client(*c);
}

bool Forwards::guest_port_unreachable(const Datagram &q) {
    if (q.v6) return false;
    const std::optional<uint32_t> c = clients_.find_guest_side(q.dst, q.src, q.dport, q.sport);
    if (!c) return false;
    close_client(*c);
    ++stats_.closed_by_guest;
    return true;
}

int64_t Forwards::next_expiry() const {
    return clients_.next_expiry(cfg_.idle_ms, cfg_.idle_answered_ms);
}

void Forwards::run_timers(int64_t now_ms) {
    while (std::optional<uint32_t> c =
               clients_.expired(now_ms, cfg_.idle_ms, cfg_.idle_answered_ms)) {
        close_client(*c);
        ++stats_.flows_expired;
    }
}

void Forwards::tap_detached() {
    while (std::optional<uint32_t> c = clients_.any()) close_client(*c);
    guest_mac_known_ = false; // the next tap's guest may differ
}

std::optional<uint16_t> Forwards::visible_port(size_t slot, const ClientAddr &client,
                                               const Endpoints &ep) const {
    // Loopback, IPv6 and in-network clients all come from the gateway as
    // the guest sees them: two with the same port, on one forward or on two
    // forwards to the same guest end (127.0.0.1 and ::1), or a client and a
    // flow the guest opened, must not share a 4-tuple, or the guest's
    // replies could not be told apart. Draws from a keyed hash of the
    // client, so a client cannot choose the port it lands on.
    uint64_t h = hash_mix(port_seed_, slot);
    h = hash_mix(h, load64(reinterpret_cast<const uint8_t *>(&client)));
    h = hash_mix(h, load64(reinterpret_cast<const uint8_t *>(&client) + 8));
    h = hash_mix(h, load64(reinterpret_cast<const uint8_t *>(&client) + 16));
    for (int draw = 0; draw <= kPortDraws; ++draw) {
        uint16_t port = ep.remote_port;
        if (draw != 0) {
            h = hash_mix(h, uint64_t(draw));
            port = uint16_t(1024 + h % (65536 - 1024));
        }
        if (clients_.find_guest_side(ep.guest, ep.remote, ep.guest_port, port)) continue;
        const uint64_t fh = guest_flows_.hash(ep.guest, ep.remote, ep.guest_port, port, ep.v6);
        if (guest_flows_.find(ep.guest, ep.remote, ep.guest_port, port, ep.v6, fh)) continue;
        return port;
    }
    return std::nullopt;
}

std::optional<uint32_t> Forwards::forwarded_flow(size_t slot, const ClientAddr &client,
                                                 socklen_t len, int64_t now_ms) {
    if (std::optional<uint32_t> idx = clients_.find_client(slot, client)) return idx;
    // A new client: its forward's rate first (a flood of new source ports
    // spends the forward's tokens, never the guest's).
    if (!clients_.take_token(slot, now_ms)) {
        ++stats_.forward_rate_limited;
        return std::nullopt;
    }
    const Forward &fw = fwds_[slot];
    Endpoints ep;
    ep.v6 = fw.v6;
    if (guest_mac_known_) std::memcpy(ep.guest_mac, guest_mac_, 6);
    std::memcpy(ep.guest, fw.guest, 16);
    sockaddr_storage peer{};
    std::memcpy(&peer, &client, std::min<size_t>(len, sizeof client));
    if (fw.v6) {
        forwarded_source6(cfg_, peer, ep.remote);
        gateway_mac6(ep.remote, ep.gw_mac); // as for a guest flow to it
    } else {
        gateway_mac4(ipv4_bytes(cfg_.gateway4).data(), ep.gw_mac);
        map_v4(ipv4_bytes(forwarded_source(cfg_, peer)).data(), ep.remote);
    }
    ep.guest_port = fw.guest_port;
    ep.remote_port = client_port(client);
    const std::optional<uint16_t> port = visible_port(slot, client, ep);
    if (!port) {
        ++stats_.forward_clashes;
        return std::nullopt;
    }
    if (*port != ep.remote_port) ++stats_.forward_remapped;
    ep.remote_port = *port;
    const ClientPool::Place place = clients_.place_for(slot);
    if (place.room == ClientPool::Room::None) {
        ++stats_.forward_full;
        return std::nullopt;
    }
    if (place.room == ClientPool::Room::Evict) {
        close_client(place.victim);
        ++stats_.forward_evicted;
    }
    const std::optional<uint32_t> idx = clients_.add(slot, client, len, ep, now_ms);
    if (!idx) { // not after place_for: cannot happen
        ++stats_.forward_full;
        return std::nullopt;
    }
    clients_[*idx].segmentation = cfg_.segmentation;
    ++stats_.flows_opened;
    ++stats_.forward_admitted;
    return idx;
}

void Forwards::receive(size_t slot) {
    if (slot >= fwds_.size() || !fwds_[slot].fd) return;
    for (size_t i = 0; i < ReadBuffers::kBatch; ++i) {
        msghdr &m = rx_.prepare(i);
        m.msg_name = &rx_names_[i];
        m.msg_namelen = sizeof rx_names_[i];
    }
    const int n = ::recvmmsg(fwds_[slot].fd.get(), rx_.msgs.data(), ReadBuffers::kBatch,
                             MSG_DONTWAIT, nullptr);
    if (n <= 0) return;
    const int64_t t = clock_ms(cfg_);
    for (int i = 0; i < n; ++i) {
        msghdr &m = rx_.msgs[i].msg_hdr;
        ++stats_.forward_datagrams;
        if (m.msg_namelen < sizeof(sockaddr_in) ||
            (rx_names_[i].sa.sa_family != AF_INET && rx_names_[i].sa.sa_family != AF_INET6))
            continue;
        const std::optional<uint32_t> idx =
            forwarded_flow(slot, rx_names_[i], m.msg_namelen, t);
        if (!idx) continue;
        clients_.touch(*idx, t);
        Flow &f = clients_[*idx];
        const size_t len = rx_.msgs[i].msg_len;
        const Received r = read_cmsgs(m, len);
        // The latest address the client used, should it change.
        if (fwds_[slot].wildcard) f.reply_from = r.to;
        static const uint8_t zero[6] = {};
        if (std::memcmp(f.ep.guest_mac, zero, 6) == 0) {
            if (!guest_mac_known_) {
                // Dropped, as a network drops what waits for ARP too long;
                // the client's retry finds the MAC known.
                ++stats_.forward_waiting_mac;
                if (last_arp_ms_ < 0 || t - last_arp_ms_ >= kArpIntervalMs) {
                    last_arp_ms_ = t;
                    // An IPv6 end shares the guest's one MAC: asked by
                    // ARP for the guest's own IPv4 address.
                    send_arp(fwds_[slot].v6 ? cfg_.guest4 : ipv4_of(fwds_[slot].guest));
                }
                continue;
            }
            std::memcpy(f.ep.guest_mac, guest_mac_, 6);
        }
        // A coalesced read (one client's burst): one GSO frame where the
        // tap takes them. Reads are not joined across clients or reads.
        carrier_.run_to_guest(f, {rx_.buf(size_t(i)), len}, r.seg);
    }
}

void Forwards::learn_guest_mac(std::span<const uint8_t> frame) {
    (void)rknp::learn_guest_mac(frame, guest_mac_, guest_mac_known_);
}

void Forwards::send_arp(uint32_t guest4) {
    // An address routed behind the guest answers no ARP: the guest does,
    // for its own, with the MAC that address is reached through.
    if ((guest4 & cfg_.mask4) != (cfg_.net4 & cfg_.mask4)) guest4 = cfg_.guest4;
    uint8_t f[kArpRequestLen];
    gateway_arp_request(cfg_.gateway4, ipv4_bytes(guest4).data(), f);
    guest_.write_frame(VnetHdr{}, {f, sizeof f}, {});
    ++stats_.arp_requests;
}

} // namespace rknp::udp
