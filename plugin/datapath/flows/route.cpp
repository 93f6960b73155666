// SPDX-License-Identifier: Apache-2.0

// classify(): which guest flows the fast paths carry, and to where.
#include "datapath/flows/route.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "common/addr.hpp"
#include "datapath/flows/endpoints.hpp"

namespace rknp {

namespace {

constexpr uint16_t kDnsPort = 53;

bool unicast6(const uint8_t a[16]) {
    static const uint8_t zero[16] = {};
    static const uint8_t loop[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    if (a[0] == 0xff) return false;                         // multicast
    if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) return false; // link-local
    if (std::memcmp(a, zero, 16) == 0 || std::memcmp(a, loop, 16) == 0) return false;
    return !is_mapped_v4(a);
}

bool in_prefix6(const uint8_t a[16], const in6_addr &p, uint32_t len) {
    return Ipv6Prefix{p, std::min<uint32_t>(len, 128)}.contains(a);
}

bool same6(const uint8_t a[16], const in6_addr &b) {
    return std::memcmp(a, b.s6_addr, 16) == 0;
}

// pasta's model for IPv6: the gateway (which may be link-local) as for
// IPv4, the mapped addresses, and every other unicast address but the
// guest's through the host.
Route classify_host6(const VirtualNet &cfg, const uint8_t src6[16],
                     const uint8_t dst6[16], uint16_t dport) {
    // The guest talks to a link-local gateway from its link-local address.
    const bool link_local_src = src6[0] == 0xfe && (src6[1] & 0xc0) == 0x80;
    if (!unicast6(src6) && !link_local_src) return Route::NotMine;
    if (same6(dst6, cfg.gateway6))
        return cfg.disable_host_loopback
                   // A link-local gateway has no meaning on the host's
                   // sockets without its interface: refused.
                   ? (unicast6(dst6) ? Route::Host : Route::Refuse)
                   : Route::Loopback;
    if (!unicast6(dst6) || same6(dst6, cfg.guest6)) return Route::NotMine;
    if (cfg.map_loopback6 && same6(dst6, *cfg.map_loopback6)) return Route::Loopback;
    if (cfg.map_guest6 && same6(dst6, *cfg.map_guest6)) return Route::GuestAddr;
    if (!IN6_IS_ADDR_UNSPECIFIED(&cfg.dns6) && same6(dst6, cfg.dns6))
        return dport == kDnsPort && cfg.resolver6 ? Route::Resolver : Route::Unreachable;
    return Route::Host;
}

} // namespace

Route classify(const VirtualNet &cfg, bool v6, const uint8_t src6[16],
               const uint8_t dst6[16], uint16_t dport) {
    if (!v6) {
        uint32_t d = ipv4_of(dst6), src = ipv4_of(src6);
        if (!is_unicast4(src) || !is_unicast4(d)) return Route::NotMine;
        if (d == cfg.gateway4) {
            if (!cfg.disable_host_loopback) return Route::Loopback;
            return cfg.host_network ? Route::Host : Route::Refuse;
        }
        const bool in_net = (d & cfg.mask4) == (cfg.net4 & cfg.mask4);
        if (!cfg.host_network)
            return d == cfg.dns4 || in_net ? Route::NotMine : Route::Host;
        if (in_net && (d == (cfg.net4 & cfg.mask4) || d == (cfg.net4 | ~cfg.mask4)))
            return Route::NotMine; // the network's own addresses
        if (cfg.map_loopback4 && d == *cfg.map_loopback4) return Route::Loopback;
        if (cfg.map_guest4 && d == *cfg.map_guest4) return Route::GuestAddr;
        if (cfg.dns && d == cfg.dns4)
            return dport == kDnsPort && cfg.resolver4 ? Route::Resolver
                                                      : Route::Unreachable;
        return d == cfg.guest4 ? Route::NotMine : Route::Host;
    }
    if (!cfg.ipv6) return Route::NotMine;
    if (cfg.host_network6) return classify_host6(cfg, src6, dst6, dport);
    if (!unicast6(src6) || !unicast6(dst6)) return Route::NotMine;
    if (same6(dst6, cfg.gateway6))
        return cfg.disable_host_loopback ? Route::Refuse : Route::Loopback;
    if (same6(dst6, cfg.dns6) || in_prefix6(dst6, cfg.prefix6, cfg.prefix6_len))
        return Route::NotMine;
    return Route::Host;
}

HostAddrs host_addrs(const VirtualNet &net, Route r, bool v6,
                     const uint8_t dst[16], uint16_t port) {
    HostAddrs a;
    if (!v6) {
        auto &t = reinterpret_cast<sockaddr_in &>(a.target);
        t.sin_family = AF_INET;
        t.sin_port = htons(port);
        if (r == Route::Loopback)
            t.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        else if (r == Route::GuestAddr)
            t.sin_addr.s_addr = htonl(net.guest4);
        else if (r == Route::Resolver && net.resolver4)
            t.sin_addr.s_addr = htonl(*net.resolver4);
        else
            std::memcpy(&t.sin_addr, dst + 12, 4);
        a.target_len = sizeof t;
        if (net.outbound_addr) {
            auto &b = reinterpret_cast<sockaddr_in &>(a.bind);
            b.sin_family = AF_INET;
            b.sin_addr.s_addr = htonl(*net.outbound_addr);
            a.bind_len = sizeof b;
        }
        return a;
    }
    auto &t = reinterpret_cast<sockaddr_in6 &>(a.target);
    t.sin6_family = AF_INET6;
    t.sin6_port = htons(port);
    if (r == Route::Loopback)
        t.sin6_addr = in6addr_loopback;
    else if (r == Route::GuestAddr)
        t.sin6_addr = net.guest6;
    else if (r == Route::Resolver && net.resolver6)
        t.sin6_addr = *net.resolver6;
    else
        std::memcpy(&t.sin6_addr, dst, 16);
    a.target_len = sizeof t;
    // An IPv4 resolver (::ffff:a.b.c.d) is not reached from an IPv6 bind.
    if (net.outbound_addr6 && !IN6_IS_ADDR_V4MAPPED(&t.sin6_addr)) {
        auto &b = reinterpret_cast<sockaddr_in6 &>(a.bind);
        b.sin6_family = AF_INET6;
        b.sin6_addr = *net.outbound_addr6;
        a.bind_len = sizeof b;
    }
    return a;
}

bool connected_to_itself(int fd, const sockaddr *target) {
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (::getsockname(fd, reinterpret_cast<sockaddr *>(&local), &len) != 0 ||
        local.ss_family != target->sa_family)
        return false;
    if (target->sa_family == AF_INET) {
        const auto &l = reinterpret_cast<const sockaddr_in &>(local);
        const auto *t = reinterpret_cast<const sockaddr_in *>(target);
        return l.sin_port == t->sin_port && l.sin_addr.s_addr == t->sin_addr.s_addr;
    }
    const auto &l = reinterpret_cast<const sockaddr_in6 &>(local);
    const auto *t = reinterpret_cast<const sockaddr_in6 *>(target);
    return l.sin6_port == t->sin6_port &&
           std::memcmp(&l.sin6_addr, &t->sin6_addr, sizeof l.sin6_addr) == 0;
}

Endpoints guest_flow_endpoints(const VirtualNet &net, bool v6,
                               const uint8_t guest_mac[6], const uint8_t src[16],
                               const uint8_t dst[16], uint16_t sport,
                               uint16_t dport) {
    Endpoints ep;
    ep.v6 = v6;
    std::memcpy(ep.guest_mac, guest_mac, 6);
    std::memcpy(ep.guest, src, 16);
    std::memcpy(ep.remote, dst, 16);
    ep.guest_port = sport;
    ep.remote_port = dport;
    if (v6)
        gateway_mac6(dst, ep.gw_mac);
    else
        gateway_mac4(ipv4_bytes(net.gateway4).data(), ep.gw_mac);
    return ep;
}

uint32_t forwarded_source(const VirtualNet &net, const sockaddr_storage &peer) {
    uint32_t a = 0;
    if (peer.ss_family == AF_INET) {
        a = ntohl(reinterpret_cast<const sockaddr_in &>(peer).sin_addr.s_addr);
    } else if (peer.ss_family == AF_INET6) {
        const auto &a6 = reinterpret_cast<const sockaddr_in6 &>(peer).sin6_addr;
        if (is_mapped_v4(a6.s6_addr)) a = ipv4_of(a6.s6_addr);
    }
    if (net.host_network && a == net.guest4) return net.map_guest4.value_or(net.gateway4);
    const bool in_net = (a & net.mask4) == (net.net4 & net.mask4);
    if (!is_unicast4(a) || (in_net && !net.host_network)) a = net.gateway4;
    return a;
}

void forwarded_source6(const VirtualNet &net, const sockaddr_storage &peer, uint8_t out[16]) {
    const in6_addr &fallback = net.map_loopback6 ? *net.map_loopback6 : net.gateway6;
    std::memcpy(out, fallback.s6_addr, 16);
    if (peer.ss_family != AF_INET6) return; // an IPv4 client: no IPv6 of its own
    const uint8_t *a = reinterpret_cast<const sockaddr_in6 &>(peer).sin6_addr.s6_addr;
    if (!unicast6(a)) return;
    if (net.host_network6 && same6(a, net.guest6)) {
        if (net.map_guest6) std::memcpy(out, net.map_guest6->s6_addr, 16);
        return;
    }
    if (!net.host_network6 && in_prefix6(a, net.prefix6, net.prefix6_len)) return;
    std::memcpy(out, a, 16);
}

} // namespace rknp
