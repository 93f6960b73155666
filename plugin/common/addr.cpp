// SPDX-License-Identifier: Apache-2.0

// Parsing and formatting of IPv4/IPv6 addresses, CIDRs, MACs and numbers.
#include "common/addr.hpp"

#include <arpa/inet.h>

#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "common/error.hpp"

namespace rknp {

namespace {

[[noreturn]] void bad(std::string_view option, std::string_view text,
                      const std::string &why) {
    throw_invalid("invalid " + std::string(option) + " \"" +
                  std::string(text) + "\": " + why);
}

// "ADDR/LEN": ADDR, with LEN (a number) in len.
std::string_view split_prefix(std::string_view option, std::string_view text,
                              const char *family, const char *example, uint32_t &len) {
    auto slash = text.find('/');
    if (slash == std::string_view::npos)
        bad(option, text,
            std::string("expected ") + family + " address/prefix, e.g. " + example);
    auto plen = text.substr(slash + 1);
    auto [end, ec] = std::from_chars(plen.data(), plen.data() + plen.size(), len);
    if (ec != std::errc() || end != plen.data() + plen.size() || plen.empty())
        bad(option, text, "prefix length is not a number");
    return text.substr(0, slash);
}

} // namespace

uint32_t Ipv4Cidr::netmask() const {
    return prefix_len == 0 ? 0 : ~uint32_t{0} << (32 - prefix_len);
}

Ipv4Cidr Ipv4Cidr::parse(std::string_view option, std::string_view text) {
    Ipv4Cidr c;
    c.network = parse_ipv4(option, split_prefix(option, text, "IPv4", "10.0.2.0/24",
                                                c.prefix_len));
    // Room for a network address, a gateway, a guest and a broadcast.
    if (c.prefix_len < 1 || c.prefix_len > 30)
        bad(option, text, "prefix length must be 1..30");
    if ((c.network & ~c.netmask()) != 0)
        bad(option, text,
            "host bits are set (network address is " +
                format_ipv4(c.network & c.netmask()) + "/" +
                std::to_string(c.prefix_len) + ")");
    c.gateway_addr = c.host(2);
    c.dns_addr = c.host(3);
    c.dhcp_addr = c.host(15);
    c.guest_addr = c.host(100);
    return c;
}

Ipv6Prefix Ipv6Prefix::parse(std::string_view option, std::string_view text) {
    Ipv6Prefix p;
    p.network = parse_ipv6(option, split_prefix(option, text, "IPv6", "2001:db8::/64", p.len));
    if (p.len < 1 || p.len > 128) bad(option, text, "prefix length must be 1..128");
    for (uint32_t bit = p.len; bit < 128; ++bit)
        p.network.s6_addr[bit / 8] &= uint8_t(~(0x80u >> (bit % 8)));
    return p;
}

bool Ipv6Prefix::contains(const uint8_t a[16]) const {
    const size_t bytes = len / 8;
    if (std::memcmp(a, network.s6_addr, bytes) != 0) return false;
    if (len % 8 == 0) return true;
    const uint8_t m = uint8_t(0xff << (8 - len % 8));
    return (a[bytes] & m) == (network.s6_addr[bytes] & m);
}

bool is_link_local6(const in6_addr &a) {
    return a.s6_addr[0] == 0xfe && (a.s6_addr[1] & 0xc0) == 0x80;
}

bool is_global_unicast6(const in6_addr &a) {
    return !IN6_IS_ADDR_UNSPECIFIED(&a) && !IN6_IS_ADDR_LOOPBACK(&a) &&
           !IN6_IS_ADDR_MULTICAST(&a) && !IN6_IS_ADDR_V4MAPPED(&a) &&
           !is_link_local6(a);
}

std::string format_ipv4(uint32_t host_order) {
    in_addr a{htonl(host_order)};
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a, buf, sizeof buf);
    return buf;
}

std::string format_ipv6(const in6_addr &a) {
    char buf[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, &a, buf, sizeof buf);
    return buf;
}

std::string format_mac(const Mac &m) {
    char buf[18];
    std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1],
                  m[2], m[3], m[4], m[5]);
    return buf;
}

uint32_t parse_ipv4(std::string_view option, std::string_view text) {
    std::string s(text);
    in_addr a{};
    if (s.empty() || inet_pton(AF_INET, s.c_str(), &a) != 1)
        bad(option, text, "not an IPv4 address");
    return ntohl(a.s_addr);
}

in6_addr parse_ipv6(std::string_view option, std::string_view text) {
    std::string s(text);
    in6_addr a{};
    if (s.empty() || inet_pton(AF_INET6, s.c_str(), &a) != 1)
        bad(option, text, "not an IPv6 address");
    return a;
}

Mac parse_mac(std::string_view option, std::string_view text) {
    Mac m{};
    if (text.size() != 17) bad(option, text, "expected xx:xx:xx:xx:xx:xx");
    for (size_t i = 0; i < 6; ++i) {
        auto part = text.substr(i * 3, 2);
        auto [end, ec] =
            std::from_chars(part.data(), part.data() + 2, m[i], 16);
        if (ec != std::errc() || end != part.data() + 2 ||
            (i < 5 && text[i * 3 + 2] != ':'))
            bad(option, text, "expected xx:xx:xx:xx:xx:xx");
    }
    if (m[0] & 1) bad(option, text, "is a multicast address");
    if (m == Mac{}) bad(option, text, "is the all-zero address");
    return m;
}

uint32_t parse_u32(std::string_view option, std::string_view text,
                   uint32_t min, uint32_t max) {
    uint32_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size())
        bad(option, text, "not a number");
    check_u32(option, v, min, max);
    return v;
}

void check_u32(std::string_view option, uint32_t value, uint32_t min,
               uint32_t max) {
    if (value < min || value > max)
        bad(option, std::to_string(value),
            "must be " + std::to_string(min) + ".." + std::to_string(max));
}

void check_ifname(std::string_view option, std::string_view name) {
    if (name.empty() || name.size() > 15)
        bad(option, name, "must be 1..15 bytes");
    if (name == "." || name == "..") bad(option, name, "is reserved");
    for (unsigned char ch : name)
        if (ch == '/' || ch == ':' || std::isspace(ch) || ch < 0x20)
            bad(option, name, "contains '/', ':', whitespace or control bytes");
}

bool same_ip_port(const sockaddr_storage &a, const sockaddr *b, socklen_t len) {
    if (a.ss_family != b->sa_family) return false;
    if (b->sa_family == AF_INET && len >= socklen_t(sizeof(sockaddr_in))) {
        auto *x = reinterpret_cast<const sockaddr_in *>(&a);
        auto *y = reinterpret_cast<const sockaddr_in *>(b);
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    if (b->sa_family == AF_INET6 && len >= socklen_t(sizeof(sockaddr_in6))) {
        auto *x = reinterpret_cast<const sockaddr_in6 *>(&a);
        auto *y = reinterpret_cast<const sockaddr_in6 *>(b);
        return x->sin6_port == y->sin6_port &&
               std::memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0;
    }
    return false;
}

bool is_unicast4(uint32_t a) {
    uint32_t top = a >> 24;
    return top != 0 && top != 127 && top < 224;
}

} // namespace rknp
