// SPDX-License-Identifier: Apache-2.0

// rknp-pasta's NetworkModel: pasta's options and the host's upstream
// interface as an rknp_config. Podman's argument list puts the namespace
// on the host's network (pasta's model); rootlesskit's -a 10.0.2.100 makes
// a network the host does not have, libslirp's virtual one, where nothing
// meant for the network (the gateway with --no-map-gw) leaves the host.
#include <doctest/doctest.h>

#include <arpa/inet.h>

#include <optional>
#include <string>

#include "cmd/common/errors.hpp"
#include "cmd/rknp-pasta/network_model.hpp"

using pasta::NetworkModel;
using pasta::Options;
using pasta::Upstream;
using pasta::Upstream6;

namespace {

uint32_t v4(const char *s) {
    in_addr a{};
    REQUIRE(inet_pton(AF_INET, s, &a) == 1);
    return ntohl(a.s_addr);
}

// The host: 192.0.2.2/24 via 192.0.2.1 on eth0.
std::optional<Upstream> host() {
    Upstream up;
    up.ifname = "eth0";
    up.address = v4("192.0.2.2");
    up.gateway = v4("192.0.2.1");
    up.prefix = 24;
    return up;
}

// The host's IPv6: 2001:db8:5::1/64 via fe80::1 (link-local, as routers
// mostly are) on eth0.
std::optional<Upstream6> host6(const char *gateway = "fe80::1") {
    Upstream6 up;
    up.ifname = "eth0";
    REQUIRE(inet_pton(AF_INET6, "2001:db8:5::1", &up.address) == 1);
    REQUIRE(inet_pton(AF_INET6, gateway, &up.gateway) == 1);
    up.prefix = 64;
    return up;
}

std::string s(const char *p) { return p ? p : "(null)"; }

std::string refusal(const Options &o, const std::optional<Upstream> &up,
                    const std::optional<Upstream6> &up6 = std::nullopt) {
    try {
        NetworkModel m(o, up, up6);
    } catch (const cmd::Failure &e) {
        return e.what();
    }
    return "no error";
}

} // namespace

TEST_CASE("pasta network model: Podman 6's argument list, the host's network") {
    Options o;
    o.config_net = true;
    o.dns_forward = {"169.254.1.1"};
    o.map_guest_addr = {"169.254.1.2"};
    o.no_map_gw = true;
    NetworkModel m(o, host());
    const rknp_config &c = m.get();
    CHECK(c.network_model == RKNP_NETWORK_MODEL_HOST);
    CHECK(s(c.cidr) == "192.0.2.0/24");
    CHECK(s(c.guest_address) == "192.0.2.2");
    CHECK(s(c.gateway) == "192.0.2.1");
    CHECK(s(c.dns_address) == "169.254.1.1");
    CHECK(s(c.map_guest_addr) == "169.254.1.2");
    CHECK(c.map_host_loopback == nullptr);
    CHECK(s(c.ifname) == "eth0");
    CHECK(c.disable_host_loopback == 1);
    CHECK(c.disable_dns == 0);
    CHECK(c.enable_dhcp == 0);

    // An address of the host's network keeps the model and the prefix.
    o.addresses = {"192.0.2.50"};
    NetworkModel other(o, host());
    CHECK(other.get().network_model == RKNP_NETWORK_MODEL_HOST);
    CHECK(s(other.get().cidr) == "192.0.2.0/24");
    CHECK(s(other.get().gateway) == "192.0.2.1");
}

TEST_CASE("pasta network model: rootlesskit's 10.0.2.100 is a virtual network") {
    Options o;
    o.config_net = true;
    o.addresses = {"10.0.2.100"};
    o.netmask = "24";
    o.gateways = {"10.0.2.2"};
    o.dns_forward = {"10.0.2.3"};
    o.no_map_gw = true;
    NetworkModel m(o, host());
    const rknp_config &c = m.get();
    CHECK(c.network_model == RKNP_NETWORK_MODEL_SLIRP);
    CHECK(s(c.cidr) == "10.0.2.0/24");
    CHECK(s(c.guest_address) == "10.0.2.100");
    CHECK(s(c.gateway) == "10.0.2.2");
    CHECK(s(c.dns_address) == "10.0.2.3");

    // What only the host's network can have is refused by name.
    Options bad = o;
    bad.map_guest_addr = {"169.254.1.2"};
    CHECK(refusal(bad, host()) ==
          "--map-guest-addr 169.254.1.2: needs the namespace on the host's "
          "network 192.0.2.0/24 (no -a, or an address of it)");
    bad = o;
    bad.dns_forward = {"169.254.1.1"};
    CHECK(refusal(bad, host()) ==
          "--dns-forward 169.254.1.1: outside 10.0.2.0/24, needs the namespace "
          "on the host's network 192.0.2.0/24 (no -a, or an address of it)");
    bad = o;
    bad.map_guest_addr = {"none"}; // Podman's way to say none
    CHECK(refusal(bad, host()) == "no error");
}

TEST_CASE("pasta network model: no default route on the host") {
    Options o;
    NetworkModel m(o, std::nullopt);
    const rknp_config &c = m.get();
    CHECK(c.network_model == RKNP_NETWORK_MODEL_SLIRP);
    CHECK(s(c.cidr) == "10.0.2.0/24");
    CHECK(s(c.guest_address) == "10.0.2.100");
    CHECK(s(c.gateway) == "10.0.2.2");
    CHECK(s(c.ifname) == "tap0");
    CHECK(c.disable_dns == 1); // no --dns-forward: no forwarder, as pasta
    o.map_guest_addr = {"169.254.1.2"};
    CHECK(refusal(o, std::nullopt).find("the host has no IPv4 default route") !=
          std::string::npos);
}

TEST_CASE("pasta network model: bad gateways are refused by name") {
    Options o;
    o.gateways = {"192.0.2.2"};
    CHECK(refusal(o, host()) == "-g/--gateway 192.0.2.2: the namespace's own address");
    o.gateways = {"198.51.100.1"};
    CHECK(refusal(o, host()) ==
          "-g/--gateway 198.51.100.1: not a host of the network 192.0.2.0/24");
}

TEST_CASE("pasta network model: rootlesskit 2.0's --no-dhcp and --no-ra") {
    // rootlesskit 2.0-2.2: --foreground --no-dhcp --no-ra ... --ipv4-only,
    // without --config-net (it configures tap0 itself).
    Options o;
    o.addresses = {"10.0.2.100"};
    o.netmask = "24";
    o.gateways = {"10.0.2.2"};
    o.dns_forward = {"10.0.2.3"};
    o.ipv4_only = true;
    o.no_ra = true;
    CHECK(NetworkModel(o, host()).get().enable_dhcp == 1); // without --no-dhcp
    o.no_dhcp = true;
    CHECK(NetworkModel(o, host()).get().enable_dhcp == 0);
    o.ipv4_only = false;
    CHECK(refusal(o, host()) == "--no-ra: rknp-pasta's IPv6 network fd00::/64 is "
                                "configured by router advertisements; add "
                                "-4/--ipv4-only");
}

// Podman 6's argument list with pasta's defaults, on a host with IPv6.
Options podman() {
    Options o;
    o.config_net = true;
    o.dns_forward = {"169.254.1.1"};
    o.map_guest_addr = {"169.254.1.2"};
    o.no_map_gw = true;
    return o;
}

TEST_CASE("pasta network model: the host's IPv6 address, prefix and gateway") {
    NetworkModel m(podman(), host(), host6());
    const rknp_config &c = m.get();
    CHECK(c.network_model == RKNP_NETWORK_MODEL_HOST);
    CHECK(c.enable_ipv6 == 1);
    CHECK(s(c.ipv6_network) == "2001:db8:5::/64");
    CHECK(s(c.ipv6_address) == "2001:db8:5::1");
    CHECK(s(c.ipv6_gateway) == "fe80::1");
    CHECK(c.map_guest_addr6 == nullptr);
    CHECK(c.disable_ipv4 == 0);
    CHECK(m.ipv6_summary() == "2001:db8:5::1/64 via fe80::1");
    // A global gateway in the network is kept; one elsewhere is not the
    // namespace's (the core's default, the network's ::1).
    CHECK(s(NetworkModel(podman(), host(), host6("2001:db8:5::fe")).get().ipv6_gateway) ==
          "2001:db8:5::fe");
    CHECK(NetworkModel(podman(), host(), host6("2001:db8:9::1")).get().ipv6_gateway ==
          nullptr);
}

TEST_CASE("pasta network model: -a, -g and the mappings take IPv6") {
    Options o = podman();
    o.addresses = {"2001:db8:5::77"};
    o.gateways = {"2001:db8:5::fe"};
    o.map_guest_addr = {"169.254.1.2", "fd99::2"};
    o.map_host_loopback = {"fd99::3"};
    NetworkModel m(o, host(), host6());
    const rknp_config &c = m.get();
    CHECK(s(c.ipv6_address) == "2001:db8:5::77");
    CHECK(s(c.ipv6_network) == "2001:db8:5::/64");
    CHECK(s(c.ipv6_gateway) == "2001:db8:5::fe");
    CHECK(s(c.map_guest_addr) == "169.254.1.2");
    CHECK(s(c.map_guest_addr6) == "fd99::2");
    CHECK(s(c.map_host_loopback6) == "fd99::3");
    // An address outside the host's network: pasta's /64 around it.
    o = podman();
    o.addresses = {"2001:db8:77::5"};
    CHECK(s(NetworkModel(o, host(), host6()).get().ipv6_network) == "2001:db8:77::/64");
    // Refused by name.
    o = podman();
    o.gateways = {"2001:db8:6::1"};
    CHECK(refusal(o, host(), host6()) ==
          "-g/--gateway 2001:db8:6::1: neither in 2001:db8:5::/64 nor link-local");
    o = podman();
    o.map_guest_addr = {"fd99::2", "fd99::4"};
    CHECK(refusal(o, host(), host6()) == "--map-guest-addr fd99::4: a second IPv6 address");
}

TEST_CASE("pasta network model: an IPv6 --dns-forward in the host's IPv6 network") {
    Options o = podman(); // --dns-forward 169.254.1.1 too
    o.dns_forward.push_back("fd99::53");
    NetworkModel m(o, host(), host6());
    CHECK(s(m.get().dns_address6) == "fd99::53");
    CHECK(s(m.get().dns_address) == "169.254.1.1");
    // Alone (-6): the IPv4 forwarder off, the IPv6 one still there.
    o = podman();
    o.ipv6_only = true;
    o.dns_forward = {"fd99::53"};
    NetworkModel v6(o, host(), host6());
    CHECK(s(v6.get().dns_address6) == "fd99::53");
    CHECK(v6.get().disable_dns == 1);
    // None given: none.
    CHECK(NetworkModel(podman(), host(), host6()).get().dns_address6 == nullptr);
}

TEST_CASE("pasta network model: no IPv6 on the host, none in the namespace") {
    Options o = podman();
    NetworkModel m(o, host(), std::nullopt);
    CHECK(m.get().enable_ipv6 == 0);
    CHECK(m.get().ipv6_network == nullptr);
    CHECK(m.ipv6_summary().empty());
    o.map_guest_addr = {"169.254.1.2", "fd99::2"};
    CHECK(refusal(o, host(), std::nullopt) ==
          "--map-guest-addr fd99::2: the host has no global IPv6 address");
    o = podman();
    o.ipv6_only = true;
    CHECK(refusal(o, host(), std::nullopt).find("-6/--ipv6-only: the host has no "
                                                "global IPv6 address") == 0);
}

TEST_CASE("pasta network model: where IPv6 stays rknp's fd00::/64") {
    // rootlesskit's virtual IPv4 network, and without --config-net (no
    // DHCPv6 or advertisements in pasta's IPv6 model).
    Options o;
    o.config_net = true;
    o.addresses = {"10.0.2.100"};
    NetworkModel slirp(o, host(), host6());
    CHECK(slirp.get().enable_ipv6 == 1);
    CHECK(slirp.get().ipv6_network == nullptr);
    o.map_host_loopback = {"fd99::3"};
    CHECK(refusal(o, host(), host6()).find("--map-host-loopback fd99::3: IPv6 mappings "
                                           "need pasta's IPv6 model") == 0);
    Options dhcp = podman();
    dhcp.config_net = false;
    CHECK(NetworkModel(dhcp, host(), host6()).get().ipv6_network == nullptr);
    // -4: no IPv6 at all.
    Options v4 = podman();
    v4.ipv4_only = true;
    CHECK(NetworkModel(v4, host(), host6()).get().enable_ipv6 == 0);
}

TEST_CASE("pasta network model: -6, IPv6 alone") {
    Options o = podman();
    o.ipv6_only = true;
    NetworkModel m(o, std::nullopt, host6());
    const rknp_config &c = m.get();
    CHECK(c.disable_ipv4 == 1);
    CHECK(c.enable_dhcp == 0);
    CHECK(c.network_model == RKNP_NETWORK_MODEL_HOST);
    CHECK(s(c.ipv6_address) == "2001:db8:5::1");
    CHECK(c.map_guest_addr == nullptr); // Podman's IPv4 ones have no effect
    CHECK(c.disable_dns == 1);
    CHECK(s(c.ifname) == "eth0");
    o.config_net = false;
    CHECK(refusal(o, std::nullopt, host6()).find("-6/--ipv6-only: needs --config-net") == 0);
}

TEST_CASE("pasta network model: /proc/net/ipv6_route's default route") {
    const std::string text =
        // a reject route on lo, a route without gateway, then two default
        // routes: the lower metric (0x100) wins.
        "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
        "00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n"
        "20010db8000500000000000000000000 40 00000000000000000000000000000000 00 "
        "00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0\n"
        "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
        "fe800000000000000000000000000009 00000400 00000001 00000000 00000003     eth1\n"
        "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
        "fe800000000000000000000000000001 00000100 00000001 00000000 00000003     eth0\n";
    auto up = pasta::parse_ipv6_default_route(text);
    REQUIRE(up);
    CHECK(up->ifname == "eth0");
    char buf[INET6_ADDRSTRLEN];
    CHECK(std::string(inet_ntop(AF_INET6, &up->gateway, buf, sizeof buf)) == "fe80::1");
    CHECK_FALSE(pasta::parse_ipv6_default_route(text.substr(0, text.find("eth0\n") + 5)));
}
