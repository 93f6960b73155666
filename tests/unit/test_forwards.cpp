// SPDX-License-Identifier: Apache-2.0

// Forward requests: defaults, validation, duplicates in the table.
#include <doctest/doctest.h>

#include <cstring>

#include "common/error.hpp"
#include "parent/forward_table.hpp"

using namespace rknp;

namespace {

rknp_forward make(uint32_t host_port, const char *host = nullptr) {
    rknp_forward f{};
    f.struct_size = sizeof f;
    f.protocol = RKNP_PROTO_TCP;
    f.host_addr = host;
    f.host_port = host_port;
    f.guest_port = 80;
    return f;
}

const Ipv4Cidr kNet = Ipv4Cidr::parse("cidr", "10.0.135.128/25");

} // namespace

TEST_CASE("forward specs default to 0.0.0.0 and the guest address") {
    auto s = ForwardSpec::from_c(make(8080), kNet);
    CHECK(s.host_string() == "0.0.0.0");
    CHECK_FALSE(s.host_v6);
    CHECK(format_ipv4(s.guest) == "10.0.135.228");
    auto v6 = ForwardSpec::from_c(make(8080, "::"), kNet);
    CHECK(v6.host_v6);
    CHECK(v6.host_string() == "::");
    CHECK_FALSE(v6.same_host_side(s));
    auto f = make(8080);
    f.guest_addr = "10.0.135.200";
    CHECK(format_ipv4(ForwardSpec::from_c(f, kNet).guest) == "10.0.135.200");
    CHECK_FALSE(ForwardSpec::from_c(f, kNet).routed);
    CHECK_FALSE(s.routed);
}

TEST_CASE("a guest_addr outside the network is routed behind the guest") {
    auto f = make(18092);
    f.guest_addr = "10.89.0.2"; // Podman's bridge network in the namespace
    auto s = ForwardSpec::from_c(f, kNet);
    CHECK(s.routed);
    CHECK(format_ipv4(s.guest) == "10.89.0.2");
    f.guest_addr = "10.0.135.1"; // just below the network
    CHECK(ForwardSpec::from_c(f, kNet).routed);
    // Never the host's own names or what no guest could answer from.
    const char *bad[][2] = {{"127.0.0.1", "not a unicast address"},
                            {"0.0.0.9", "not a unicast address"},
                            {"224.0.0.1", "not a unicast address"},
                            {"255.255.255.255", "not a unicast address"}};
    for (const auto &[addr, what] : bad) {
        f.guest_addr = addr;
        CHECK_THROWS_WITH_AS(ForwardSpec::from_c(f, kNet),
                             ("invalid guest_addr \"" + std::string(addr) +
                              "\": outside 10.0.135.128/25, so routed behind the "
                              "guest, but " + what)
                                 .c_str(),
                             Error);
    }
    // pasta's model: the DNS forwarder may lie outside the network.
    Ipv4Cidr net = kNet;
    net.dns_addr = 0xa9fe0101; // 169.254.1.1
    f.guest_addr = "169.254.1.1";
    CHECK_THROWS_WITH_AS(ForwardSpec::from_c(f, net),
                         "invalid guest_addr \"169.254.1.1\": outside "
                         "10.0.135.128/25, so routed behind the guest, but the "
                         "DNS forwarder",
                         Error);
    f.guest_addr = "fd00::2";
    CHECK_THROWS_AS(ForwardSpec::from_c(f, kNet), Error); // no IPv6 network
}

TEST_CASE("a forward to the network's own addresses is refused, not dropped") {
    auto f = make(8080);
    const char *own[][2] = {{"10.0.135.128", "the network address"},
                            {"10.0.135.255", "the broadcast address"},
                            {"10.0.135.130", "the gateway"},
                            {"10.0.135.131", "the DNS forwarder"}};
    for (const auto &[addr, what] : own) {
        f.guest_addr = addr;
        CHECK_THROWS_WITH_AS(ForwardSpec::from_c(f, kNet),
                             ("invalid guest_addr \"" + std::string(addr) +
                              "\": " + what + " of 10.0.135.128/25, not a guest")
                                 .c_str(),
                             Error);
    }
    f.guest_addr = "10.0.135.132"; // the first address a guest may have
    CHECK(format_ipv4(ForwardSpec::from_c(f, kNet).guest) == "10.0.135.132");
}

TEST_CASE("the table refuses duplicate host sides and unknown ids") {
    ForwardTable t;
    auto a = ForwardSpec::from_c(make(8080, "127.0.0.1"), kNet);
    t.check_new(a);
    uint32_t id = t.insert(a);
    CHECK_THROWS_WITH_AS(t.check_new(a),
                         "tcp 127.0.0.1:8080 is already forwarded (id 1)", Error);
    auto udp_same_port = make(8080, "127.0.0.1");
    udp_same_port.protocol = RKNP_PROTO_UDP;
    CHECK_NOTHROW(t.check_new(ForwardSpec::from_c(udp_same_port, kNet)));
    CHECK_NOTHROW(t.check_new(ForwardSpec::from_c(make(8080, "127.0.0.2"), kNet)));
    CHECK(t.at(id).host_port == 8080);
    CHECK_THROWS_WITH_AS(t.at(42), "no forward with id 42", Error);
    t.erase(id);
    CHECK(t.all().empty());
    CHECK(t.insert(a) == 2); // ids are never reused
}

TEST_CASE("an IPv6 guest_addr: a guest address in the IPv6 network, else routed") {
    GuestNet6 net6;
    net6.prefix = Ipv6Prefix::parse("net", "fd19::/64");
    net6.gateway = parse_ipv6("gw", "fe80::1");
    net6.dns = parse_ipv6("dns", "fd19::53");
    auto f = make(18095, "::");
    f.guest_addr = "fd19::5";
    auto in = ForwardSpec::from_c(f, kNet, &net6);
    CHECK(in.guest_v6);
    CHECK_FALSE(in.routed);
    CHECK(in.guest_string() == "fd19::5");
    f.guest_addr = "fd00:aaaa::0002"; // a container on a bridge in the namespace
    auto routed = ForwardSpec::from_c(f, kNet, &net6);
    CHECK(routed.routed);
    CHECK(routed.guest_string() == "fd00:aaaa::2");
    uint8_t b[16];
    routed.guest_bytes(b);
    CHECK(std::memcmp(b, routed.guest6.s6_addr, 16) == 0);
    // IPv4 ends still key as ::ffff:a.b.c.d.
    ForwardSpec::from_c(make(8080), kNet).guest_bytes(b);
    const uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 135, 228};
    CHECK(std::memcmp(b, mapped, 16) == 0);
    const char *bad[][2] = {
        {"::1", "outside fd19::/64, so routed behind the guest, but not a global unicast address"},
        {"fe80::9", "outside fd19::/64, so routed behind the guest, but not a global unicast "
                    "address"},
        {"ff02::1", "outside fd19::/64, so routed behind the guest, but not a global unicast "
                    "address"},
        {"::ffff:10.0.0.1", "outside fd19::/64, so routed behind the guest, but not a global "
                            "unicast address"},
        {"fd19::53", "the DNS forwarder of fd19::/64, not a guest"},
        {"fd19::", "the network address of fd19::/64, not a guest"}};
    for (const auto &[addr, why] : bad) {
        f.guest_addr = addr;
        CHECK_THROWS_WITH_AS(ForwardSpec::from_c(f, kNet, &net6),
                             ("invalid guest_addr \"" + std::string(addr) + "\": " + why).c_str(),
                             Error);
    }
    net6.gateway = parse_ipv6("gw", "fd19::1");
    f.guest_addr = "fd19::1";
    CHECK_THROWS_WITH_AS(ForwardSpec::from_c(f, kNet, &net6),
                         "invalid guest_addr \"fd19::1\": the gateway of fd19::/64, not a guest",
                         Error);
    // Without IPv6, by name.
    CHECK_THROWS_WITH_AS(ForwardSpec::from_c(f, kNet),
                         "invalid guest_addr \"fd19::1\": IPv6 is not enabled", Error);
}
