// SPDX-License-Identifier: Apache-2.0

// A forward libslirp carries to an address routed behind the guest (a
// container on a bridge network in the namespace, 10.89.0.2): a real
// libslirp behind GuestIngress with a socketpair as the tap. libslirp's
// ARP for that address is answered with the guest's MAC (or turned into
// one for the guest's own address while it is unknown), its SYN goes to
// the address, the replies from it pass the guest filter into libslirp,
// and nothing else from it does.
#include <doctest/doctest.h>

#include <sys/socket.h>

#include "common/config.hpp"
#include "common/stats.hpp"
#include "datapath/coalescer.hpp"
#include "datapath/tap_io.hpp"
#include "parent/flow_limits.hpp"
#include "parent/guest_ingress.hpp"
#include "slirp/adapter.hpp"
#include "slirp/poll_set.hpp"
#include "tcp_sim_guest.hpp"
#include "tcp_sim_forward.hpp"

using namespace tcpsim;
using rknp::GuestIngress;

namespace {

struct RoutedRig {
    rknp::ParentConfig cfg = rknp::ParentConfig::from_c(rknp::default_config());
    rknp::Stats stats;
    rknp::TapIo tap{stats};
    rknp::Coalescer coalescer{tap, stats};
    rknp::PollSet polls;
    rknp::FlowLimits limits{64, 1000, stats, 1000};
    rknp::SlirpAdapter slirp{cfg, tap, coalescer, polls,
                             [](bool) { return rknp::Admission::Accept; }};
    GuestIngress ingress{cfg.cidr, stats, limits, {&slirp}};
    int guest_fd = -1;

    RoutedRig() {
        int sv[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
        tap.attach(rknp::UniqueFd(sv[0]), false);
        guest_fd = sv[1];
    }
    ~RoutedRig() { ::close(guest_fd); }
    void pump(int rounds) {
        for (int i = 0; i < rounds; ++i) {
            uint32_t timeout = 5;
            slirp.before_wait(timeout);
            polls.wait(int(std::min<uint32_t>(timeout, 5)));
            slirp.after_wait(false, false);
            slirp.run_timers(rknp::monotonic_ms());
            coalescer.flush();
        }
    }
    GuestIngress::Outcome send(Bytes f) {
        const GuestIngress::Outcome o = ingress.input(f, false, 0);
        pump(2);
        return o;
    }
    // Every frame libslirp sent the guest since the last call.
    std::vector<Bytes> from_slirp() {
        std::vector<Bytes> out;
        uint8_t buf[2048];
        ssize_t n;
        while ((n = ::recv(guest_fd, buf, sizeof buf, MSG_DONTWAIT)) > 0)
            out.emplace_back(buf, buf + n);
        return out;
    }
    // A gratuitous-ARP-free way to teach the MAC: an ARP request for the
    // gateway from the guest.
    void guest_arp() {
        Bytes arp(42, 0);
        std::memset(arp.data(), 0xff, 6);
        std::memcpy(arp.data() + 6, kGuestMac, 6);
        arp[12] = 0x08, arp[13] = 0x06;
        const uint8_t hdr[8] = {0, 1, 0x08, 0x00, 6, 4, 0, 1};
        std::memcpy(arp.data() + 14, hdr, 8);
        std::memcpy(arp.data() + 22, kGuestMac, 6);
        const uint8_t sip[4] = {10, 0, 2, 100}, tip[4] = {10, 0, 2, 2};
        std::memcpy(arp.data() + 28, sip, 4);
        std::memcpy(arp.data() + 38, tip, 4);
        CHECK(send(arp) == GuestIngress::Outcome::Path);
        (void)from_slirp(); // libslirp's reply
    }
};

bool is_arp_for(const Bytes &f, uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
    return f.size() >= 42 && f[12] == 0x08 && f[13] == 0x06 && f[21] == 1 && f[38] == a &&
           f[39] == b && f[40] == c && f[41] == d;
}

rknp::ForwardSpec routed_forward(uint16_t host_port, const rknp::Ipv4Cidr &net,
                                 uint32_t proto = RKNP_PROTO_TCP) {
    rknp_forward f = RKNP_FORWARD_INIT;
    f.protocol = proto;
    f.host_addr = "127.0.0.1";
    f.host_port = host_port;
    f.guest_port = 8000;
    f.guest_addr = "10.89.0.2";
    rknp::ForwardSpec s = rknp::ForwardSpec::from_c(f, net);
    REQUIRE(s.routed);
    return s;
}

} // namespace

TEST_CASE("slirp routed: a forward to an address behind the guest, both ways") {
    RoutedRig rig;
    bool mac_known = true;
    SUBCASE("the guest's MAC known") { rig.guest_arp(); }
    SUBCASE("the guest's MAC not known yet") { mac_known = false; }
    const uint16_t port = free_port();
    const rknp::ForwardSpec fwd = routed_forward(port, rig.cfg.cidr);
    rig.slirp.add_forward(fwd);
    uint16_t cport = 0;
    int c = client(port, &cport);
    REQUIRE(c >= 0);

    uint8_t routed[16], gw[16];
    addr4(routed, 10, 89, 0, 2);
    addr4(gw, 10, 0, 2, 2);
    // libslirp accepts and sends its SYN to 10.89.0.2 through the guest's
    // MAC; no ARP for 10.89.0.2 reaches the guest (nothing there answers).
    Segment syn;
    bool got_syn = false, asked_guest = false;
    for (int i = 0; i < 2000 && !got_syn; ++i) {
        rig.pump(1);
        for (const Bytes &f : rig.from_slirp()) {
            CHECK_FALSE(is_arp_for(f, 10, 89, 0, 2));
            if (is_arp_for(f, 10, 0, 2, 100)) {
                // While the MAC is unknown it asks for the guest's own
                // address; the guest's answer teaches libslirp and rknp.
                asked_guest = true;
                Bytes reply(42, 0);
                std::memcpy(reply.data(), f.data() + 6, 6);
                std::memcpy(reply.data() + 6, kGuestMac, 6);
                reply[12] = 0x08, reply[13] = 0x06;
                const uint8_t hdr[8] = {0, 1, 0x08, 0x00, 6, 4, 0, 2};
                std::memcpy(reply.data() + 14, hdr, 8);
                std::memcpy(reply.data() + 22, kGuestMac, 6);
                std::memcpy(reply.data() + 28, f.data() + 38, 4);
                std::memcpy(reply.data() + 32, f.data() + 22, 10);
                CHECK(rig.send(reply) == GuestIngress::Outcome::Path);
            }
            Segment s;
            if (parse_segment(f, s) == rknp::Parse::Ok && (s.flags & kSyn)) {
                syn = s;
                got_syn = true;
                CHECK(std::memcmp(f.data(), kGuestMac, 6) == 0);
            }
        }
    }
    REQUIRE(got_syn);
    CHECK(asked_guest == !mac_known);
    CHECK(std::memcmp(syn.dst, routed, 16) == 0);
    CHECK(syn.dport == 8000);
    CHECK(std::memcmp(syn.src, gw, 16) == 0); // a loopback client, as libslirp shows it
    CHECK(syn.sport == cport);

    // The container's SYN-ACK and data, from 10.89.0.2: through the
    // filter into libslirp, to the client.
    auto from_routed = [&](uint8_t flags, uint32_t seq, uint32_t ack, const Bytes &d) {
        return rig.send(guest_frame(false, routed, gw, 8000, cport, flags, seq, ack, 65535,
                                    d.data(), d.size()));
    };
    CHECK(from_routed(kSyn | kAck, 5000, syn.seq + 1, {}) == GuestIngress::Outcome::Path);
    const Bytes hello = pattern(1000, 7);
    CHECK(from_routed(kAck | kPsh, 5001, syn.seq + 1, hello) == GuestIngress::Outcome::Path);
    Bytes got;
    for (int i = 0; i < 400 && got.size() < hello.size(); ++i) {
        rig.pump(1);
        drain(c, got);
    }
    CHECK(got == hello);

    // From that address nothing else: a SYN anywhere (a socket), another
    // port, another protocol; nothing reached libslirp or made a socket.
    const size_t flows = rig.slirp.flows();
    uint8_t far[16];
    addr4(far, 192, 0, 2, 1);
    const uint64_t filtered = rig.stats.frames_filtered.load();
    CHECK(rig.send(guest_frame(false, routed, far, 8000, 80, kSyn, 1, 0, 65535, nullptr, 0)) ==
          GuestIngress::Outcome::Filtered);
    CHECK(rig.send(guest_frame(false, routed, gw, 8001, cport, kAck, 5001, syn.seq + 1, 65535,
                               nullptr, 0)) == GuestIngress::Outcome::Filtered);
    uint8_t other[16];
    addr4(other, 10, 89, 0, 3);
    CHECK(rig.send(guest_frame(false, other, gw, 8000, cport, kAck, 5001, syn.seq + 1, 65535,
                               nullptr, 0)) == GuestIngress::Outcome::Filtered);
    CHECK(rig.stats.frames_filtered.load() == filtered + 3);
    CHECK(rig.slirp.flows() == flows);

    // Removed, its connection goes on (libslirp's, as for any forward).
    rig.slirp.remove_forward(fwd);
    const Bytes more = pattern(500, 8);
    CHECK(from_routed(kAck | kPsh, 5001 + 1000, syn.seq + 1, more) ==
          GuestIngress::Outcome::Path);
    got.clear();
    for (int i = 0; i < 400 && got.size() < more.size(); ++i) {
        rig.pump(1);
        drain(c, got);
    }
    CHECK(got == more);
    ::close(c);
}

TEST_CASE("slirp routed: UDP to an address behind the guest, and only while forwarded") {
    RoutedRig rig;
    rig.guest_arp();
    const uint16_t port = free_port();
    const rknp::ForwardSpec fwd = routed_forward(port, rig.cfg.cidr, RKNP_PROTO_UDP);
    rig.slirp.add_forward(fwd);
    int c = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_storage to = loopback(port);
    REQUIRE(::connect(c, reinterpret_cast<sockaddr *>(&to), sizeof(sockaddr_in)) == 0);
    REQUIRE(::send(c, "ask", 3, 0) == 3);
    uint8_t routed[4] = {10, 89, 0, 2};
    Bytes datagram;
    for (int i = 0; i < 400 && datagram.empty(); ++i) {
        rig.pump(1);
        for (const Bytes &f : rig.from_slirp()) {
            CHECK_FALSE(is_arp_for(f, 10, 89, 0, 2));
            if (f.size() > 42 && f[12] == 0x08 && f[23] == 17) datagram = f;
        }
    }
    REQUIRE_FALSE(datagram.empty());
    CHECK(std::memcmp(datagram.data(), kGuestMac, 6) == 0);
    CHECK(std::memcmp(datagram.data() + 30, routed, 4) == 0);
    CHECK(rknp::be16(datagram.data() + 36) == 8000);
    // The reply from 10.89.0.2:8000 to where the datagram came from.
    Bytes reply(datagram);
    std::memcpy(reply.data(), kGuestMac, 6);
    std::memcpy(reply.data() + 6, datagram.data(), 6);
    std::memcpy(reply.data() + 26, datagram.data() + 30, 4);
    std::memcpy(reply.data() + 30, datagram.data() + 26, 4);
    std::memcpy(reply.data() + 34, datagram.data() + 36, 2);
    std::memcpy(reply.data() + 36, datagram.data() + 34, 2);
    reply[40] = reply[41] = 0; // no UDP checksum
    rknp::put_be16(reply.data() + 24, 0);
    rknp::put_be16(reply.data() + 24,
                   uint16_t(~rknp::csum_fold(rknp::csum_add(0, reply.data() + 14, 20))));
    CHECK(rig.send(reply) == GuestIngress::Outcome::Path);
    char buf[16];
    ssize_t n = -1;
    for (int i = 0; i < 200 && n < 0; ++i) {
        rig.pump(1);
        n = ::recv(c, buf, sizeof buf, MSG_DONTWAIT);
    }
    CHECK(n == 3);
    // Once the forward is gone, a datagram from there would make libslirp
    // a socket of its own: filtered.
    rig.slirp.remove_forward(fwd);
    CHECK(rig.send(reply) == GuestIngress::Outcome::Filtered);
    ::close(c);
}
