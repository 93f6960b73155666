// SPDX-License-Identifier: Apache-2.0

// Address, CIDR, MAC and number parsing and formatting; socket address
// comparison.
#include <doctest/doctest.h>

#include <arpa/inet.h>

#include <cstring>

#include "common/addr.hpp"
#include "common/error.hpp"

using namespace rknp;

TEST_CASE("CIDR defaults give slirp4netns's host layout") {
    auto c = Ipv4Cidr::parse("cidr", "10.0.2.0/24");
    CHECK(format_ipv4(c.network) == "10.0.2.0");
    CHECK(c.prefix_len == 24);
    CHECK(format_ipv4(c.netmask()) == "255.255.255.0");
    CHECK(format_ipv4(c.gateway()) == "10.0.2.2");
    CHECK(format_ipv4(c.dns()) == "10.0.2.3");
    CHECK(format_ipv4(c.dhcp_start()) == "10.0.2.15");
    CHECK(format_ipv4(c.guest()) == "10.0.2.100");
}

TEST_CASE("CIDR /25 in the upper half") {
    auto c = Ipv4Cidr::parse("cidr", "10.0.135.128/25");
    CHECK(format_ipv4(c.netmask()) == "255.255.255.128");
    CHECK(format_ipv4(c.gateway()) == "10.0.135.130");
    CHECK(format_ipv4(c.guest()) == "10.0.135.228");
}

TEST_CASE("CIDR errors name the option, the value and the reason") {
    auto msg = [](const char *text) {
        try {
            Ipv4Cidr::parse("cidr", text);
        } catch (const Error &e) {
            CHECK(e.code() == RKNP_ERR_INVALID_ARGUMENT);
            return std::string(e.what());
        }
        return std::string("no error");
    };
    CHECK(msg("10.0.2.5/24") ==
          "invalid cidr \"10.0.2.5/24\": host bits are set (network address "
          "is 10.0.2.0/24)");
    CHECK(msg("10.0.2.0/31").find("prefix length must be 1..30") !=
          std::string::npos);
    CHECK(msg("10.0.2.0/0").find("1..30") != std::string::npos);
    // The default layout: .2, .3, .15, .100.
    const Ipv4Cidr n = Ipv4Cidr::parse("cidr", "10.0.2.0/24");
    CHECK(format_ipv4(n.gateway()) == "10.0.2.2");
    CHECK(format_ipv4(n.dns()) == "10.0.2.3");
    CHECK(format_ipv4(n.dhcp_start()) == "10.0.2.15");
    CHECK(format_ipv4(n.guest()) == "10.0.2.100");
    CHECK(format_ipv4(n.broadcast()) == "10.0.2.255");
    CHECK(n.contains(n.guest()));
    CHECK_FALSE(n.contains(0x0a000300));
    CHECK(msg("10.0.2.0").find("expected IPv4 address/prefix") !=
          std::string::npos);
    CHECK(msg("10.0.2.0/x").find("not a number") != std::string::npos);
    CHECK(msg("10.0.2.0/").find("not a number") != std::string::npos);
    CHECK(msg("300.0.2.0/24").find("not an IPv4 address") != std::string::npos);
    CHECK(msg("fd00::/64").find("not an IPv4 address") != std::string::npos);
}

TEST_CASE("MAC addresses") {
    CHECK(format_mac(parse_mac("mac", "02:00:5e:10:00:01")) ==
          "02:00:5e:10:00:01");
    CHECK(format_mac(parse_mac("mac", "0A:BB:cc:DD:ee:FF")) ==
          "0a:bb:cc:dd:ee:ff");
    CHECK_THROWS_WITH_AS(parse_mac("mac", "01:00:5e:00:00:01"),
                         "invalid mac \"01:00:5e:00:00:01\": is a multicast "
                         "address",
                         Error);
    CHECK_THROWS_AS(parse_mac("mac", "00:00:00:00:00:00"), Error);
    CHECK_THROWS_AS(parse_mac("mac", "02-00-5e-10-00-01"), Error);
    CHECK_THROWS_AS(parse_mac("mac", "02:00:5e:10:00"), Error);
    CHECK_THROWS_AS(parse_mac("mac", "02:00:5e:10:00:0g"), Error);
}

TEST_CASE("numbers and interface names") {
    CHECK(parse_u32("mtu", "1500", 68, 65520) == 1500);
    CHECK_THROWS_WITH_AS(parse_u32("mtu", "65521", 68, 65520),
                         "invalid mtu \"65521\": must be 68..65520", Error);
    CHECK_THROWS_AS(parse_u32("mtu", "-1", 68, 65520), Error);
    CHECK_THROWS_AS(parse_u32("mtu", "", 68, 65520), Error);
    CHECK_THROWS_AS(parse_u32("mtu", "15x", 68, 65520), Error);
    CHECK_NOTHROW(check_ifname("ifname", "tap0"));
    CHECK_NOTHROW(check_ifname("ifname", "abcdefghijklmno"));
    CHECK_THROWS_AS(check_ifname("ifname", "abcdefghijklmnop"), Error);
    CHECK_THROWS_AS(check_ifname("ifname", ""), Error);
    CHECK_THROWS_AS(check_ifname("ifname", "a/b"), Error);
    CHECK_THROWS_AS(check_ifname("ifname", "a b"), Error);
    CHECK_THROWS_AS(check_ifname("ifname", ".."), Error);
}

TEST_CASE("same_ip_port: family, address and port, nothing else") {
    sockaddr_storage a{};
    auto *a4 = reinterpret_cast<sockaddr_in *>(&a);
    a4->sin_family = AF_INET;
    a4->sin_port = htons(8080);
    a4->sin_addr.s_addr = htonl(0x7f000001);
    sockaddr_in b4 = *a4;
    const auto *b = reinterpret_cast<const sockaddr *>(&b4);
    CHECK(same_ip_port(a, b, sizeof b4));
    CHECK_FALSE(same_ip_port(a, b, sizeof b4 - 1)); // too short to hold one
    b4.sin_port = htons(8081);
    CHECK_FALSE(same_ip_port(a, b, sizeof b4));
    b4.sin_port = htons(8080);
    b4.sin_addr.s_addr = htonl(0x7f000002);
    CHECK_FALSE(same_ip_port(a, b, sizeof b4));

    sockaddr_in6 b6{};
    b6.sin6_family = AF_INET6;
    b6.sin6_port = htons(8080);
    b6.sin6_addr = in6addr_loopback;
    const auto *b6p = reinterpret_cast<const sockaddr *>(&b6);
    CHECK_FALSE(same_ip_port(a, b6p, sizeof b6)); // another family
    sockaddr_storage a6{};
    std::memcpy(&a6, &b6, sizeof b6);
    CHECK(same_ip_port(a6, b6p, sizeof b6));
    b6.sin6_addr.s6_addr[15] = 2;
    CHECK_FALSE(same_ip_port(a6, b6p, sizeof b6));
    b6.sin6_family = AF_UNIX;
    a6.ss_family = AF_UNIX;
    CHECK_FALSE(same_ip_port(a6, b6p, sizeof b6)); // neither IPv4 nor IPv6
}
