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

// IPv4 network in CIDR notation with rknp's fixed host layout
// (slirp4netns's): gateway .2, DNS .3, DHCP start .15, guest .100.
struct Ipv4Cidr {
    uint32_t network = 0; // host byte order
    uint32_t prefix_len = 0;

    static Ipv4Cidr parse(std::string_view option, std::string_view text);

    uint32_t netmask() const;
    uint32_t host(uint32_t offset) const { return network + offset; }
    uint32_t gateway() const { return host(2); }
    uint32_t dns() const { return host(3); }
    uint32_t dhcp_start() const { return host(15); }
    uint32_t guest() const { return host(100); }
};

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
