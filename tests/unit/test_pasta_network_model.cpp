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

std::string s(const char *p) { return p ? p : "(null)"; }

std::string refusal(const Options &o, const std::optional<Upstream> &up) {
    try {
        NetworkModel m(o, up);
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
    o.map_guest_addr = "169.254.1.2";
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
    bad.map_guest_addr = "169.254.1.2";
    CHECK(refusal(bad, host()) ==
          "--map-guest-addr 169.254.1.2: needs the namespace on the host's "
          "network 192.0.2.0/24 (no -a, or an address of it)");
    bad = o;
    bad.dns_forward = {"169.254.1.1"};
    CHECK(refusal(bad, host()) ==
          "--dns-forward 169.254.1.1: outside 10.0.2.0/24, needs the namespace "
          "on the host's network 192.0.2.0/24 (no -a, or an address of it)");
    bad = o;
    bad.map_guest_addr = "none"; // Podman's way to say none
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
    o.map_guest_addr = "169.254.1.2";
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
    CHECK(refusal(o, host()) == "--no-ra: rknp-pasta's IPv6 network is configured by "
                                "router advertisements; add -4/--ipv4-only");
}
