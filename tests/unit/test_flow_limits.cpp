// SPDX-License-Identifier: Apache-2.0

// max_flows and max_new_flows_per_sec: the token bucket, the table of
// libslirp's guest sockets, frame classification, and refusal at the cap
// on both TCP paths (a real libslirp behind FlowLimits; the fast path's
// simulated guest with FlowLimits as its admission).
#include <doctest/doctest.h>

#include <netinet/in.h>

#include <cstdint>
#include <map>
#include <random>

#include "parent/flow_limits.hpp"
#include "slirp/flow_gate.hpp"
#include "slirp_rig.hpp"

using namespace rknp;
using namespace rknp::tcp;
using namespace tcpsim;

namespace {

FlowKey udp_key(uint16_t sport) {
    FlowKey k;
    k.proto = IPPROTO_UDP;
    addr4(k.src, 10, 0, 2, 100);
    k.sport = sport;
    return k;
}

// A UDP datagram from the guest (10.0.2.100:sport) to 10.0.2.2:dport.
Bytes udp_frame(uint16_t sport, uint16_t dport) {
    Bytes f(14 + 20 + 8 + 4, 0);
    std::memset(f.data(), 0x52, 6);
    std::memcpy(f.data() + 6, kGuestMac, 6);
    put16(f.data() + 12, 0x0800);
    uint8_t *ip = f.data() + 14;
    ip[0] = 0x45;
    put16(ip + 2, uint16_t(f.size() - 14));
    ip[8] = 64;
    ip[9] = 17;
    const uint8_t src[4] = {10, 0, 2, 100}, dst[4] = {10, 0, 2, 2};
    std::memcpy(ip + 12, src, 4);
    std::memcpy(ip + 16, dst, 4);
    put16(ip + 10, uint16_t(~csum_fold(csum_add(0, ip, 20))));
    put16(ip + 20, sport);
    put16(ip + 22, dport);
    put16(ip + 24, 12); // UDP checksum 0: none
    std::memcpy(ip + 28, "ping", 4);
    return f;
}

Ipv4Cidr default_net() { return ParentConfig::from_c(default_config()).cidr; }

} // namespace

TEST_CASE("token bucket: burst of rate, then one token per 1/rate s") {
    TokenBucket b(10, 5000);
    int taken = 0;
    for (int i = 0; i < 25; ++i) taken += b.take(5000);
    CHECK(taken == 10); // the burst, then exactly 15 refusals
    CHECK_FALSE(b.take(5099)); // 99 ms: 0.99 of a token
    CHECK(b.take(5100));       // 100 ms (total): one token
    CHECK_FALSE(b.take(5100));
    // A long pause refills to the burst, not beyond.
    taken = 0;
    for (int i = 0; i < 25; ++i) taken += b.take(1'000'000);
    CHECK(taken == 10);
}

TEST_CASE("token bucket: the clock wrapping around and stepping back") {
    const uint64_t near_end = UINT64_MAX - 49; // 50 ms before the wrap
    TokenBucket b(1000, near_end);
    for (int i = 0; i < 1000; ++i) REQUIRE(b.take(near_end));
    CHECK_FALSE(b.take(near_end));
    // 100 ms later, across the wrap: 100 tokens, not 0 and not a full bucket.
    const uint64_t after = near_end + 100; // wraps to 50
    CHECK(after == 50);
    int taken = 0;
    for (int i = 0; i < 1000; ++i) taken += b.take(after);
    CHECK(taken == 100);
    // A clock stepping back gives nothing (and is not taken as 2^64 ms).
    CHECK_FALSE(b.take(after - 10));
    CHECK(b.take(after - 10 + 1)); // 1 ms later at rate 1000: one token
}

TEST_CASE("guest sockets: only registrations inside slirp_input count") {
    GuestSockets t(8);
    t.on_register(40); // a forward's accepted connection
    CHECK(t.size() == 0);
    t.begin_input(udp_key(1000));
    t.on_register(-1); // udp_attach announces failed sockets too
    t.on_register(41);
    t.end_input();
    CHECK(t.size() == 1);
    CHECK(t.contains(udp_key(1000)));
    CHECK_FALSE(t.contains(udp_key(1001)));
    t.on_unregister(40); // not ours: nothing happens
    CHECK(t.size() == 1);
    // fd 41 closed without unregister and handed out again: replaced.
    t.begin_input(udp_key(1001));
    t.on_register(41);
    t.end_input();
    CHECK(t.size() == 1);
    CHECK_FALSE(t.contains(udp_key(1000)));
    CHECK(t.contains(udp_key(1001)));
    t.on_unregister(41);
    CHECK(t.size() == 0);
    CHECK_FALSE(t.contains(udp_key(1001)));
}

TEST_CASE("guest sockets: a full table stays bounded; churn keeps lookups right") {
    GuestSockets t(100);
    std::map<int, uint16_t> model; // fd -> source port
    std::mt19937 rng(7);
    int next_fd = 100;
    for (int step = 0; step < 20000; ++step) {
        if (model.size() < 100 && (rng() % 3 != 0 || model.empty())) {
            uint16_t port = uint16_t(rng());
            bool dup = false;
            for (auto &[fd, p] : model) dup = dup || p == port;
            if (dup) continue;
            t.begin_input(udp_key(port));
            t.on_register(next_fd);
            t.end_input();
            model[next_fd++] = port;
        } else {
            auto it = model.begin();
            std::advance(it, long(rng() % model.size()));
            t.on_unregister(it->first);
            model.erase(it);
        }
        REQUIRE(t.size() == model.size());
        if (step % 97 == 0)
            for (auto &[fd, p] : model) REQUIRE(t.contains(udp_key(p)));
    }
    // Beyond capacity nothing is stored (the cap refuses earlier).
    GuestSockets small(2);
    for (int fd = 10; fd < 20; ++fd) {
        small.begin_input(udp_key(uint16_t(fd)));
        small.on_register(fd);
        small.end_input();
    }
    CHECK(small.size() == 2);
}

TEST_CASE("classify_new_flow: SYNs, UDP sources, echo requests") {
    Ipv4Cidr net = default_net();
    NewFlow s = classify_new_flow(syn_frame(40000, 80), net);
    CHECK(s.candidate);
    CHECK(s.key.proto == IPPROTO_TCP);
    CHECK(s.key.sport == 40000);
    CHECK(s.key.dport == 80);
    CHECK_FALSE(classify_new_flow(syn_frame(40000, 80, kSyn | kAck), net).candidate);
    CHECK_FALSE(classify_new_flow(syn_frame(40000, 80, kAck), net).candidate);
    NewFlow u = classify_new_flow(udp_frame(5353, 53), net);
    CHECK(u.candidate);
    CHECK(u.key == udp_key(5353)); // keyed by source only, as libslirp
    Bytes ping = udp_frame(0, 0);
    ping[14 + 9] = 1; // ICMP
    ping[14 + 20] = 8; // echo request to the gateway: answered by libslirp
    CHECK_FALSE(classify_new_flow(ping, net).candidate);
    ping[14 + 19] = 9; // to 10.0.2.9: a socket per request
    CHECK(classify_new_flow(ping, net).candidate);
    CHECK(classify_new_flow(ping, net).key.proto == 0);
    Bytes arp = udp_frame(1, 1);
    put16(arp.data() + 12, 0x0806);
    CHECK_FALSE(classify_new_flow(arp, net).candidate);
    CHECK_FALSE(classify_new_flow(std::span(arp.data(), 20), net).candidate);
}

TEST_CASE("effective max_flows leaves a quarter of RLIMIT_NOFILE") {
    CHECK(effective_max_flows(16384, 4096) == 3072);
    CHECK(effective_max_flows(1000, 4096) == 1000);
    CHECK(effective_max_flows(16384, 0) == 16384);
    CHECK(effective_max_flows(16384, 1) == 1);
}

TEST_CASE("libslirp path: at max_flows N the N+1th SYN is refused and counted") {
    Listener l;
    SlirpRig rig(3, 1000);
    for (uint16_t i = 0; i < 3; ++i) REQUIRE(rig.input(syn_frame(41000 + i, l.port)));
    CHECK(rig.slirp->flows() == 3); // libslirp connect()ed three
    CHECK_FALSE(rig.input(syn_frame(41003, l.port)));
    CHECK(rig.stats.flows_refused.load() == 1);
    CHECK(rig.stats.flows_rate_limited.load() == 0);
    CHECK(rig.slirp->flows() == 3);
    // A retransmitted SYN of a flow libslirp has is not a new flow.
    CHECK(rig.input(syn_frame(41001, l.port)));
    CHECK(rig.stats.flows_refused.load() == 1);
    // Non-SYN segments go through: they make no socket.
    CHECK(rig.input(syn_frame(41005, l.port, kAck)));
    CHECK(rig.slirp->flows() == 3);
}

TEST_CASE("libslirp path: UDP sources take at most half, and the rate limit") {
    int u = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(u, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    ::getsockname(u, reinterpret_cast<sockaddr *>(&a), &len);
    uint16_t port = ntohs(a.sin_port);
    Listener l;

    SlirpRig rig(8, 2); // UDP: 4 sockets; a burst of 2 new flows, 2 a second
    CHECK(rig.input(udp_frame(5000, port)));
    CHECK(rig.input(udp_frame(5001, port)));
    CHECK_FALSE(rig.input(udp_frame(5002, port))); // bucket empty
    CHECK(rig.stats.flows_rate_limited.load() == 1);
    CHECK(rig.input(udp_frame(5000, port))); // known source: no token
    rig.now += 1000;
    CHECK(rig.input(udp_frame(5002, port)));
    CHECK(rig.input(udp_frame(5003, port)));
    CHECK(rig.slirp->flows() == 4);
    CHECK(rig.slirp->lingering_flows() == 4);
    rig.now += 1000;
    CHECK_FALSE(rig.input(udp_frame(5004, port))); // UDP's half is full
    CHECK(rig.stats.flows_refused.load() == 1);
    CHECK(rig.stats.flows_rate_limited.load() == 1);
    CHECK(rig.input(udp_frame(5003, port)));
    // TCP still has the other half.
    CHECK(rig.input(syn_frame(43000, l.port)));
    CHECK(rig.slirp->flows() == 5);
    CHECK(rig.slirp->lingering_flows() == 4);
    CHECK(rig.stats.flows_refused.load() == 1);
    ::close(u);
}

TEST_CASE("fast path: at max_flows N the N+1th SYN gets an RST and is counted") {
    Stats stats;
    FlowLimits limits(2, 1000, stats, 0);
    FastPathConfig cfg = Sim::base_config();
    std::unique_ptr<Sim> sim;
    cfg.admit_flow = [&] {
        switch (limits.admit(sim->fp->flows(), uint64_t(sim->now))) {
        case FlowLimits::Admit::Ok: return Admission::Accept;
        case FlowLimits::Admit::Full: return Admission::Reset;
        default: return Admission::Drop;
        }
    };
    sim = std::make_unique<Sim>(cfg);
    Listener l;
    Guest a(*sim, false, l.port, 42000), b(*sim, false, l.port, 42001),
        x(*sim, false, l.port, 42002);
    REQUIRE(a.connect());
    REQUIRE(b.connect());
    REQUIRE(x.syn() == Verdict::Consumed);
    Rx r;
    REQUIRE(x.next(r));
    CHECK((r.seg.flags & kRst) != 0);
    CHECK(stats.flows_refused.load() == 1);
    CHECK(sim->fp->flows() == 2);
}

TEST_CASE("fast path: rate-limited SYNs are dropped silently and counted") {
    Stats stats;
    FlowLimits limits(100, 1, stats, 0);
    FastPathConfig cfg = Sim::base_config();
    std::unique_ptr<Sim> sim;
    cfg.admit_flow = [&] {
        return limits.admit(sim->fp->flows(), uint64_t(sim->now)) ==
                       FlowLimits::Admit::Ok
                   ? Admission::Accept
                   : Admission::Drop;
    };
    sim = std::make_unique<Sim>(cfg);
    Listener l;
    Guest a(*sim, false, l.port, 42000), x(*sim, false, l.port, 42001);
    REQUIRE(a.connect());
    REQUIRE(x.syn() == Verdict::Consumed);
    Rx r;
    CHECK_FALSE(x.next(r, 100)); // no answer: the guest retransmits
    CHECK(stats.flows_rate_limited.load() == 1);
    CHECK(sim->fp->flows() == 1);
}
