// SPDX-License-Identifier: Apache-2.0

// Validation of a forward request into a ForwardSpec, and its host side.
#include "datapath/forward_spec.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"

namespace rknp {

namespace {

// An IPv6 guest_addr: in the guest's IPv6 network a guest address (not
// one the network answers for itself), outside it an address routed
// behind the guest, as for IPv4.
void check_guest6(ForwardSpec &s, const char *text, const GuestNet6 *net6) {
    auto refuse = [text](const std::string &why) {
        throw_invalid("invalid guest_addr \"" + std::string(text) + "\": " + why);
    };
    if (net6 == nullptr) refuse("IPv6 is not enabled");
    s.guest_v6 = true;
    s.guest6 = parse_ipv6("guest_addr", text);
    const std::string net = format_ipv6(net6->prefix.network) + "/" +
                            std::to_string(net6->prefix.len);
    const char *what = nullptr;
    if (!is_global_unicast6(s.guest6)) what = "not a global unicast address";
    else if (net6->dns && same_ipv6(s.guest6, *net6->dns)) what = "the DNS forwarder";
    else if (same_ipv6(s.guest6, net6->gateway)) what = "the gateway";
    if (!net6->prefix.contains(s.guest6)) {
        // Routed behind the guest, as for IPv4: never what the paths
        // answer for themselves or no guest could answer from.
        s.routed = true;
        if (what) refuse("outside " + net + ", so routed behind the guest, but " + what);
        return;
    }
    if (!what && same_ipv6(s.guest6, net6->prefix.network)) what = "the network address";
    if (what) refuse(std::string(what) + " of " + net + ", not a guest");
}

} // namespace

namespace {

// The library's duplicate of f.handoff_fd, checked: an AF_UNIX
// SOCK_SEQPACKET socket keeps each message whole with its fd, so one
// connection is one message (rknp.h, RKNP_FORWARD_HANDOFF_LOOPBACK).
std::shared_ptr<const UniqueFd> handoff_socket(const rknp_forward &f, bool udp) {
    if (udp)
        throw_invalid("RKNP_FORWARD_HANDOFF_LOOPBACK is for TCP forwards only");
    int domain = 0, type = 0;
    socklen_t len = sizeof domain;
    if (f.handoff_fd < 0 ||
        ::getsockopt(f.handoff_fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0 ||
        (len = sizeof type,
         ::getsockopt(f.handoff_fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0) ||
        domain != AF_UNIX || type != SOCK_SEQPACKET)
        throw_invalid("invalid handoff_fd " + std::to_string(f.handoff_fd) +
                      ": not an AF_UNIX SOCK_SEQPACKET socket");
    UniqueFd dup(::fcntl(f.handoff_fd, F_DUPFD_CLOEXEC, 0));
    if (!dup) throw Error(RKNP_ERR_SYSTEM, "handoff_fd: dup: " + std::string(std::strerror(errno)));
    return std::make_shared<const UniqueFd>(std::move(dup));
}

} // namespace

ForwardSpec ForwardSpec::from_c(const rknp_forward &f, const Ipv4Cidr &net,
                                const GuestNet6 *net6) {
    ForwardSpec s;
    if (f.protocol != RKNP_PROTO_TCP && f.protocol != RKNP_PROTO_UDP)
        throw_invalid("invalid protocol \"" + std::to_string(f.protocol) +
                      "\": must be RKNP_PROTO_TCP or RKNP_PROTO_UDP");
    s.udp = f.protocol == RKNP_PROTO_UDP;
    if (f.flags & ~uint32_t(RKNP_FORWARD_HANDOFF_LOOPBACK))
        throw_invalid("invalid flags " + std::to_string(f.flags) +
                      ": only RKNP_FORWARD_HANDOFF_LOOPBACK is known");
    if (f.flags & RKNP_FORWARD_HANDOFF_LOOPBACK) s.handoff = handoff_socket(f, s.udp);
    check_u32("host_port", f.host_port, 1, 65535);
    check_u32("guest_port", f.guest_port, 1, 65535);
    s.host_port = uint16_t(f.host_port);
    s.guest_port = uint16_t(f.guest_port);
    std::string host = f.host_addr != nullptr ? f.host_addr : "0.0.0.0";
    if (host.find(':') != std::string::npos) {
        s.host_v6 = true;
        s.host6 = parse_ipv6("host_addr", host);
    } else {
        s.host4 = parse_ipv4("host_addr", host);
    }
    if (f.guest_addr != nullptr && std::strchr(f.guest_addr, ':') != nullptr) {
        check_guest6(s, f.guest_addr, net6);
    } else if (f.guest_addr != nullptr) {
        s.guest = parse_ipv4("guest_addr", f.guest_addr);
        const uint32_t broadcast = net.network | ~net.netmask();
        const char *what = nullptr;
        if ((s.guest & net.netmask()) != net.network) {
            // Routed behind the guest (a container on a bridge network in
            // the namespace): any unicast address but the host's own
            // names for the guest's side (loopback, 0/8) and the DNS
            // forwarder, which the paths answer for themselves.
            s.routed = true;
            if (!is_unicast4(s.guest)) what = "not a unicast address";
            else if (s.guest == net.dns()) what = "the DNS forwarder";
            if (what)
                throw_invalid("invalid guest_addr \"" + std::string(f.guest_addr) +
                              "\": outside " + format_ipv4(net.network) + "/" +
                              std::to_string(net.prefix_len) +
                              ", so routed behind the guest, but " + what);
            return s;
        }
        // Addresses of the network itself: libslirp would take the
        // connection for itself or drop it, silently.
        if (s.guest == net.network) what = "the network address";
        else if (s.guest == broadcast) what = "the broadcast address";
        else if (s.guest == net.gateway()) what = "the gateway";
        else if (s.guest == net.dns()) what = "the DNS forwarder";
        if (what)
            throw_invalid("invalid guest_addr \"" + std::string(f.guest_addr) +
                          "\": " + what + " of " + format_ipv4(net.network) +
                          "/" + std::to_string(net.prefix_len) +
                          ", not a guest");
    } else {
        s.guest = net.guest();
    }
    return s;
}

std::string ForwardSpec::host_string() const {
    return host_v6 ? format_ipv6(host6) : format_ipv4(host4);
}

std::string ForwardSpec::guest_string() const {
    return guest_v6 ? format_ipv6(guest6) : format_ipv4(guest);
}

void ForwardSpec::guest_bytes(uint8_t out[16]) const {
    if (guest_v6) {
        std::memcpy(out, guest6.s6_addr, 16);
        return;
    }
    // ::ffff:a.b.c.d, as the paths key IPv4 flows.
    std::memset(out, 0, 10);
    out[10] = out[11] = 0xff;
    const uint32_t n = htonl(guest);
    std::memcpy(out + 12, &n, 4);
}

std::string ForwardSpec::host_side() const {
    return std::string(udp ? "udp " : "tcp ") + host_string() + ":" +
           std::to_string(host_port);
}

bool ForwardSpec::same_host_side(const ForwardSpec &o) const {
    if (udp != o.udp || host_port != o.host_port || host_v6 != o.host_v6)
        return false;
    return host_v6 ? std::memcmp(&host6, &o.host6, sizeof host6) == 0
                   : host4 == o.host4;
}

socklen_t ForwardSpec::host_sockaddr(sockaddr_storage &out) const {
    out = sockaddr_storage{};
    if (host_v6) {
        auto *a = reinterpret_cast<sockaddr_in6 *>(&out);
        a->sin6_family = AF_INET6;
        a->sin6_addr = host6;
        a->sin6_port = htons(host_port);
        return sizeof *a;
    }
    auto *a = reinterpret_cast<sockaddr_in *>(&out);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(host4);
    a->sin_port = htons(host_port);
    return sizeof *a;
}

void ForwardSpec::check_added(int err) const {
    if (err != 0) throw_errno("forward " + host_side(), err);
}

} // namespace rknp
