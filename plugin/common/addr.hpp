// SPDX-License-Identifier: Apache-2.0

// Parsing and validation of addresses, names and numbers (every error names
// the option and the offending value), and the comparison of socket
// addresses.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace rknp {

using Mac = std::array<uint8_t, 6>;

// A unicast IPv4 address (host byte order) a host socket may sensibly
// talk to or from, and a configuration may name: not 0/8, loopback,
// multicast or the reserved and broadcast range above it.
bool is_unicast4(uint32_t host_order);

// An IPv4 network and where its addresses are: by default slirp4netns's
// layout (gateway .2, DNS .3, DHCP start .15, guest .100), or what
// rknp_config 1.6 names (ParentConfig::from_c). The DNS address may lie
// outside the network (pasta's --dns-forward).
struct Ipv4Cidr {
    uint32_t network = 0; // host byte order, as all below
    uint32_t prefix_len = 0;
    uint32_t guest_addr = 0, gateway_addr = 0, dns_addr = 0, dhcp_addr = 0;

    // The network with the default layout; prefix 1..30 (the default
    // guest .100 needs 1..25: ParentConfig checks the layout it ends with).
    static Ipv4Cidr parse(std::string_view option, std::string_view text);

    uint32_t netmask() const;
    uint32_t broadcast() const { return network | ~netmask(); }
    bool contains(uint32_t a) const { return (a & netmask()) == network; }
    uint32_t host(uint32_t offset) const { return network + offset; }
    uint32_t gateway() const { return gateway_addr; }
    uint32_t dns() const { return dns_addr; }
    uint32_t dhcp_start() const { return dhcp_addr; }
    uint32_t guest() const { return guest_addr; }
};

// An IPv6 network, "ADDR/LEN" (LEN 1..128; host bits are cleared, so that
// an interface's "ADDR/LEN", pasta's and ip's form, names its network).
struct Ipv6Prefix {
    in6_addr network{};
    uint32_t len = 64;

    static Ipv6Prefix parse(std::string_view option, std::string_view text);
    bool contains(const uint8_t a[16]) const;
    bool contains(const in6_addr &a) const { return contains(a.s6_addr); }
};

inline bool same_ipv6(const in6_addr &a, const in6_addr &b) {
    return IN6_ARE_ADDR_EQUAL(&a, &b);
}
// fe80::/10.
bool is_link_local6(const in6_addr &a);
// Neither ::, ::1, multicast, IPv4-mapped nor link-local.
bool is_global_unicast6(const in6_addr &a);

std::string format_ipv4(uint32_t host_order);
std::string format_ipv6(const in6_addr &a);
std::string format_mac(const Mac &mac);

uint32_t parse_ipv4(std::string_view option, std::string_view text);
in6_addr parse_ipv6(std::string_view option, std::string_view text);
Mac parse_mac(std::string_view option, std::string_view text);
uint32_t parse_u32(std::string_view option, std::string_view text,
                   uint32_t min, uint32_t max);
void check_u32(std::string_view option, uint32_t value, uint32_t min,
               uint32_t max);
// Linux interface name: 1..15 bytes, no '/', ':' or whitespace, not . or ..
void check_ifname(std::string_view option, std::string_view name);

// Same family, address and port (IPv4 or IPv6; b is len bytes long, other
// families never match): whether two forwards claim one host socket.
bool same_ip_port(const sockaddr_storage &a, const sockaddr *b, socklen_t len);

} // namespace rknp
