// SPDX-License-Identifier: Apache-2.0

// ARP for the host's neighbours in pasta's model: the guest's request for
// any address of its network but its own is answered through GuestIngress
// with the gateway's MAC, nothing reaches libslirp; off (libslirp's model)
// every ARP frame goes on to libslirp as before.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "common/config.hpp"
#include "datapath/neighbour_proxy.hpp"
#include "libslirp_stand_in.hpp"
#include "parent/guest_ingress.hpp"
#include "recording_sink.hpp"

using namespace rknp;
using Bytes = std::vector<uint8_t>;

namespace {

const uint8_t kGuestMac[6] = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};

// An Ethernet/IPv4 ARP request from the guest at sender for target.
Bytes arp_request(const uint8_t sender[4], const uint8_t target[4]) {
    Bytes f(kArpFrameLen, 0);
    std::memset(f.data(), 0xff, 6);
    std::memcpy(f.data() + 6, kGuestMac, 6);
    f[12] = 0x08, f[13] = 0x06;
    uint8_t *a = f.data() + 14;
    a[1] = 1;               // Ethernet
    a[2] = 0x08, a[3] = 0;  // IPv4
    a[4] = 6, a[5] = 4;
    a[7] = 1;               // request
    std::memcpy(a + 8, kGuestMac, 6);
    std::memcpy(a + 14, sender, 4);
    std::memcpy(a + 24, target, 4);
    return f;
}

using Sink = RecordingSink;

ParentConfig host_network_config() {
    rknp_config c = default_config();
    c.cidr = "192.168.1.0/24";
    c.guest_address = "192.168.1.5";
    c.gateway = "192.168.1.1";
    c.network_model = RKNP_NETWORK_MODEL_HOST;
    return ParentConfig::from_c(c);
}

} // namespace

TEST_CASE("neighbour ARP: every address of the network but the guest's") {
    const Ipv4Cidr net = host_network_config().cidr;
    const uint8_t guest[4] = {192, 168, 1, 5};
    std::array<uint8_t, kArpFrameLen> reply{};

    const uint8_t lan_host[4] = {192, 168, 1, 77};
    REQUIRE(answer_neighbour_arp(arp_request(guest, lan_host), net, reply));
    const uint8_t gw_mac[6] = {0x52, 0x55, 192, 168, 1, 1}; // libslirp's gateway MAC
    CHECK(std::memcmp(reply.data(), kGuestMac, 6) == 0);    // to the asker
    CHECK(std::memcmp(reply.data() + 6, gw_mac, 6) == 0);
    const uint8_t *a = reply.data() + 14;
    CHECK(a[7] == 2); // reply
    CHECK(std::memcmp(a + 8, gw_mac, 6) == 0);
    CHECK(std::memcmp(a + 14, lan_host, 4) == 0);
    CHECK(std::memcmp(a + 18, kGuestMac, 6) == 0);
    CHECK(std::memcmp(a + 24, guest, 4) == 0);

    const uint8_t gateway[4] = {192, 168, 1, 1};
    CHECK(answer_neighbour_arp(arp_request(guest, gateway), net, reply));
    // Not answered: the guest's own address (duplicate address detection
    // must find it free), its announcement, the network's own addresses,
    // other networks, replies, truncated frames.
    CHECK_FALSE(answer_neighbour_arp(arp_request(guest, guest), net, reply));
    const uint8_t zero[4] = {0, 0, 0, 0};
    CHECK_FALSE(answer_neighbour_arp(arp_request(zero, guest), net, reply));
    const uint8_t bcast[4] = {192, 168, 1, 255}, netaddr[4] = {192, 168, 1, 0};
    CHECK_FALSE(answer_neighbour_arp(arp_request(guest, bcast), net, reply));
    CHECK_FALSE(answer_neighbour_arp(arp_request(guest, netaddr), net, reply));
    const uint8_t other[4] = {192, 168, 2, 7};
    CHECK_FALSE(answer_neighbour_arp(arp_request(guest, other), net, reply));
    Bytes r = arp_request(guest, lan_host);
    r[14 + 7] = 2;
    CHECK_FALSE(answer_neighbour_arp(r, net, reply));
    r = arp_request(guest, lan_host);
    r.resize(40);
    CHECK_FALSE(answer_neighbour_arp(r, net, reply));
}

TEST_CASE("neighbour ARP: GuestIngress answers in pasta's model only") {
    for (bool host_network : {true, false}) {
        CAPTURE(host_network);
        ParentConfig cfg = host_network_config();
        Stats stats;
        FlowLimits limits(100, 1000, stats, 1000);
        Sink sink;
        GuestIngress *in = nullptr;
        LibslirpStandIn slirp(cfg.cidr, 100,
                                    [&](bool l) { return in->admit_flow(1000, l); });
        auto &to_libslirp = slirp.frames;
        GuestIngress ingress(cfg.cidr, stats, limits, {&slirp});
        in = &ingress;
        if (host_network) ingress.set_neighbour_proxy(&sink);
        const uint8_t guest[4] = {192, 168, 1, 5}, lan_host[4] = {192, 168, 1, 77};
        Bytes req = arp_request(guest, lan_host);
        const auto outcome = ingress.input(req, false, 1000);
        if (host_network) {
            CHECK(outcome == GuestIngress::Outcome::Answered);
            REQUIRE(sink.frames.size() == 1);
            CHECK(sink.frames[0][14 + 7] == 2);
            CHECK(to_libslirp.empty());
        } else {
            CHECK(outcome == GuestIngress::Outcome::Path);
            CHECK(sink.frames.empty());
            CHECK(to_libslirp.size() == 1);
        }
    }
}
