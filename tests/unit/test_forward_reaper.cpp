// SPDX-License-Identifier: Apache-2.0

// ForwardReaper: which of libslirp's sockets are a forward's connections
// (real loopback sockets as the host side), and the resets it makes when
// one's client is gone: into libslirp at the sequence it expects, and to
// the guest, at once on a reset, after the guest acknowledged libslirp's
// FIN on a clean close, once; none for a socket libslirp let go.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/fd.hpp"
#include "datapath/checksum.hpp"
#include "datapath/forward_spec.hpp"
#include "own_netns.hpp"
#include "slirp/forward_reaper.hpp"
#include "tcp_sim_forward.hpp"

using namespace tcpsim;

namespace {

constexpr uint32_t kGateway4 = 0x0a000202; // 10.0.2.2
constexpr uint32_t kIss = 0xfffffff8; // libslirp's: wraps within 10 bytes
constexpr uint32_t kGuestIss = 500000;

ForwardReaper make_reaper() {
    uint8_t gw6[16];
    addr6(gw6, "fd00::2");
    return ForwardReaper(kGateway4, gw6);
}

// tcp HOST:port -> guest 10.0.2.100:8080 (or fd00::100:8080 for IPv6).
ForwardSpec tcp_forward(uint16_t port, bool v6 = false, const char *host = nullptr) {
    ForwardSpec f;
    f.host_port = port;
    f.guest_port = kGuestPort;
    if (v6) {
        f.host_v6 = true;
        inet_pton(AF_INET6, host ? host : "::1", &f.host6);
        f.guest_v6 = true;
        inet_pton(AF_INET6, "fd00::100", &f.guest6);
    } else {
        in_addr a{};
        inet_pton(AF_INET, host ? host : "127.0.0.1", &a);
        f.host4 = ntohl(a.s_addr);
        f.guest = kGuest4;
    }
    return f;
}

// A client from local address `from` (any when null) to addr:port, and
// the listener's accepted socket: what libslirp registers for it.
struct HostConn {
    UniqueFd client, accepted;
    uint16_t cport = 0;
};
HostConn connect_pair(const Listener &l, const char *addr, const char *from = nullptr,
                      uint16_t from_port = 0) {
    HostConn c;
    const int family = l.v6 ? AF_INET6 : AF_INET;
    c.client = UniqueFd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    REQUIRE(c.client);
    sockaddr_storage to{}, local{};
    socklen_t len = len_of(l.v6);
    if (l.v6) {
        auto &a = reinterpret_cast<sockaddr_in6 &>(to);
        a.sin6_family = AF_INET6;
        a.sin6_port = htons(l.port);
        REQUIRE(inet_pton(AF_INET6, addr, &a.sin6_addr) == 1);
    } else {
        auto &a = reinterpret_cast<sockaddr_in &>(to);
        a.sin_family = AF_INET;
        a.sin_port = htons(l.port);
        REQUIRE(inet_pton(AF_INET, addr, &a.sin_addr) == 1);
    }
    if (from) {
        local.ss_family = sa_family_t(family);
        auto &l6 = reinterpret_cast<sockaddr_in6 &>(local);
        auto &l4 = reinterpret_cast<sockaddr_in &>(local);
        void *dst = l.v6 ? static_cast<void *>(&l6.sin6_addr) : &l4.sin_addr;
        REQUIRE(inet_pton(family, from, dst) == 1);
        (l.v6 ? l6.sin6_port : l4.sin_port) = htons(from_port);
        REQUIRE(::bind(c.client.get(), reinterpret_cast<sockaddr *>(&local), len) == 0);
    }
    REQUIRE(::connect(c.client.get(), reinterpret_cast<sockaddr *>(&to), len) == 0);
    socklen_t ll = sizeof local;
    REQUIRE(::getsockname(c.client.get(), reinterpret_cast<sockaddr *>(&local), &ll) == 0);
    c.cport = ntohs(l.v6 ? reinterpret_cast<sockaddr_in6 &>(local).sin6_port
                         : reinterpret_cast<sockaddr_in &>(local).sin_port);
    int a = -1;
    for (int i = 0; i < 1000 && a < 0; ++i) {
        a = l.try_accept();
        if (a < 0) ::usleep(1000);
    }
    REQUIRE(a >= 0);
    c.accepted = UniqueFd(a);
    return c;
}

// One forwarded connection's two ends as the guest's frames carry them:
// the client as libslirp shows it (remote) and the guest's server.
struct Tuple {
    bool v6 = false;
    uint8_t remote[16]{}, guest[16]{};
    uint16_t rport = 0;
    Tuple(uint16_t client_port, const char *remote_addr = "10.0.2.2") : rport(client_port) {
        if (std::strchr(remote_addr, ':')) {
            v6 = true;
            addr6(remote, remote_addr);
            addr6(guest, "fd00::100");
        } else {
            in_addr a{};
            inet_pton(AF_INET, remote_addr, &a);
            map_v4(reinterpret_cast<const uint8_t *>(&a), remote);
            addr4(guest, 10, 0, 2, 100);
        }
    }
    // A segment libslirp sends the guest (from its MAC to the guest's).
    Bytes slirp(uint8_t flags, uint32_t seq, uint32_t ack, size_t len = 0) const {
        const Bytes d(len, 0x61);
        Bytes f = guest_frame(v6, remote, guest, rport, kGuestPort, flags, seq, ack, 65535,
                              d.data(), d.size());
        std::swap_ranges(f.begin(), f.begin() + 6, f.begin() + 6);
        return f;
    }
    // A segment of the guest's to libslirp.
    Bytes guest_seg(uint8_t flags, uint32_t seq, uint32_t ack, size_t len = 0) const {
        const Bytes d(len, 0x62);
        return guest_frame(v6, guest, remote, kGuestPort, rport, flags, seq, ack, 65535,
                           d.data(), d.size());
    }
    // libslirp's SYN, the guest's SYN-ACK, libslirp's ACK: ESTABLISHED,
    // libslirp's snd_nxt kIss + 1, rcv_nxt kGuestIss + 1.
    void handshake(ForwardReaper &r) const {
        r.from_slirp(slirp(kSyn, kIss, 0));
        r.from_guest(guest_seg(kSyn | kAck, kGuestIss, kIss + 1));
        r.from_slirp(slirp(kAck, kIss + 1, kGuestIss + 1));
    }
    // Then 10 bytes each way, acknowledged: snd_nxt kIss + 11, rcv_nxt
    // kGuestIss + 11.
    void exchange(ForwardReaper &r) const {
        r.from_slirp(slirp(kAck | kPsh, kIss + 1, kGuestIss + 1, 10));
        r.from_guest(guest_seg(kAck, kGuestIss + 1, kIss + 11, 10));
        r.from_slirp(slirp(kAck, kIss + 11, kGuestIss + 11));
    }
};

// Whether a whole frame's IPv4 header and TCP checksums verify.
bool checksums_complete(const Bytes &f) {
    const uint8_t *ip = f.data() + kEthLen;
    const bool v6 = (ip[0] >> 4) == 6;
    const size_t ip_len = v6 ? kIp6Len : kIp4Len;
    const size_t l4 = f.size() - kEthLen - ip_len;
    uint64_t sum = csum_add(0, ip + ip_len, l4);
    if (v6) {
        const uint8_t t[8] = {0, 0, uint8_t(l4 >> 8), uint8_t(l4), 0, 0, 0, 6};
        sum = csum_add(csum_add(sum, ip + 8, 32), t, 8);
    } else {
        if (csum_fold(csum_add(0, ip, kIp4Len)) != 0xffff) return false;
        const uint8_t t[4] = {0, 6, uint8_t(l4 >> 8), uint8_t(l4)};
        sum = csum_add(csum_add(sum, ip + 12, 8), t, 4);
    }
    return csum_fold(sum) == 0xffff;
}

struct DueFrame {
    Bytes frame;
    Segment seg; // into frame
    bool to_guest = false;
};
// Every frame due, parsed (copies: the reaper's spans do not last).
std::vector<DueFrame> due(ForwardReaper &r) {
    std::vector<DueFrame> v;
    std::span<const uint8_t> f;
    bool to_guest = false;
    while (r.next_due(f, to_guest)) {
        v.push_back({Bytes(f.begin(), f.end()), {}, to_guest});
        if (v.size() > 16) break;
    }
    for (DueFrame &o : v) REQUIRE(parse_segment(o.frame, o.seg) == Parse::Ok);
    return v;
}

const uint8_t kSlirpMac[6] = {0x52, 0x52, 0x52, 0x52, 0x52, 0x52};

// The two resets of flow: into libslirp (from the guest's end to the
// client's, flags and seq/ack as given) and to the guest.
void check_resets(const std::vector<DueFrame> &v, const Tuple &fl, uint8_t in_flags,
                  uint32_t in_seq, uint32_t in_ack, uint8_t out_flags, uint32_t out_seq,
                  uint32_t out_ack) {
    REQUIRE(v.size() == 2);
    const auto in = v[0].to_guest ? v.begin() + 1 : v.begin();
    const auto out = v[0].to_guest ? v.begin() : v.begin() + 1;
    REQUIRE(in->to_guest != out->to_guest);
    for (const DueFrame &o : v) {
        CHECK(checksums_complete(o.frame));
        CHECK(o.seg.v6 == fl.v6);
        CHECK(o.seg.payload.empty());
    }
    // Into libslirp: as the guest would send it.
    CHECK(std::memcmp(in->frame.data(), kSlirpMac, 6) == 0);
    CHECK(std::memcmp(in->seg.src_mac, kGuestMac, 6) == 0);
    CHECK(std::memcmp(in->seg.src, fl.guest, 16) == 0);
    CHECK(std::memcmp(in->seg.dst, fl.remote, 16) == 0);
    CHECK(in->seg.sport == kGuestPort);
    CHECK(in->seg.dport == fl.rport);
    CHECK(in->seg.flags == in_flags);
    CHECK(in->seg.seq == in_seq);
    CHECK(in->seg.ack == in_ack);
    // To the guest: as libslirp would send it.
    CHECK(std::memcmp(out->frame.data(), kGuestMac, 6) == 0);
    CHECK(std::memcmp(out->seg.src_mac, kSlirpMac, 6) == 0);
    CHECK(std::memcmp(out->seg.src, fl.remote, 16) == 0);
    CHECK(std::memcmp(out->seg.dst, fl.guest, 16) == 0);
    CHECK(out->seg.sport == fl.rport);
    CHECK(out->seg.dport == kGuestPort);
    CHECK(out->seg.flags == out_flags);
    CHECK(out->seg.seq == out_seq);
    CHECK(out->seg.ack == out_ack);
}

// A reaper with a forward of a loopback listener's port.
struct Forwarded4 {
    Listener l;
    ForwardReaper r = make_reaper();
    Forwarded4() {
        REQUIRE(l.port != 0);
        r.add_forward(tcp_forward(l.port));
    }
};

// And a client on 127.0.0.1 connected to it, tracked: fl its tuple.
struct Tracked4 : Forwarded4 {
    HostConn c = connect_pair(l, "127.0.0.1");
    Tuple fl{c.cport}; // 127.0.0.1 shown as the gateway
    Tracked4() { REQUIRE(r.on_register(c.accepted.get())); }
};

} // namespace

TEST_CASE_FIXTURE(Forwarded4, "forward reaper: tracks the connections accepted on a forward") {
    HostConn c = connect_pair(l, "127.0.0.1");
    CHECK(r.on_register(c.accepted.get()));
    CHECK(r.tracked() == 1);
    CHECK_FALSE(r.on_register(l.fd));             // the listener: no peer
    CHECK_FALSE(r.on_register(c.client.get()));   // its local port is not the forward's
    Listener other;
    HostConn o = connect_pair(other, "127.0.0.1");    // another port's connection
    CHECK_FALSE(r.on_register(o.accepted.get()));
    CHECK_FALSE(r.on_register(-1));
    CHECK(r.tracked() == 1);
    // A UDP forward of that other port is none of its business.
    ForwardSpec u = tcp_forward(other.port);
    u.udp = true;
    r.add_forward(u);
    CHECK_FALSE(r.on_register(o.accepted.get()));
    // Nor a forward bound to another address than the connection's.
    r.add_forward(tcp_forward(other.port, false, "127.0.0.2"));
    CHECK_FALSE(r.on_register(o.accepted.get()));
    // Without forwards, nothing.
    ForwardReaper none = make_reaper();
    CHECK_FALSE(none.on_register(c.accepted.get()));
}

TEST_CASE_FIXTURE(Tracked4,
                  "forward reaper: a client's reset ends the connection both ways, once") {
    fl.handshake(r);
    fl.exchange(r);
    std::span<const uint8_t> f;
    bool to_guest = false;
    CHECK_FALSE(r.next_due(f, to_guest));
    CHECK(r.reaped() == 0);

    r.host_gone(c.accepted.get(), true);
    // Into libslirp: RST at the sequence it acknowledged last; to the
    // guest: RST|ACK at libslirp's snd_nxt, acknowledging its rcv_nxt.
    check_resets(due(r), fl, kRst, kGuestIss + 11, 0, kRst | kAck, kIss + 11, kGuestIss + 11);
    CHECK(r.reaped() == 1);
    CHECK_FALSE(r.next_due(f, to_guest));
}

// A hangup listed again before libslirp unregisters the socket (a parked
// socket's later wakeup, or a reset libslirp did not take) once made both
// resets again.
TEST_CASE_FIXTURE(Tracked4, "forward reaper: a reaped socket's second hangup makes nothing") {
    fl.handshake(r);
    fl.exchange(r);
    r.host_gone(c.accepted.get(), true);
    REQUIRE(due(r).size() == 2);
    r.host_gone(c.accepted.get(), true);
    CHECK(due(r).empty());
    r.host_gone(c.accepted.get(), false);
    CHECK(due(r).empty());
    CHECK(r.reaped() == 1);
}

TEST_CASE_FIXTURE(Tracked4,
                  "forward reaper: a clean close waits for the guest's ACK of the FIN") {
    fl.handshake(r);
    fl.exchange(r);
    // libslirp read the client's EOF: its FIN, at kIss + 11.
    r.from_slirp(fl.slirp(kFin | kAck, kIss + 11, kGuestIss + 11));
    r.host_gone(c.accepted.get(), false);
    CHECK(due(r).empty());
    // The guest's ACKs short of the FIN: still nothing.
    r.from_guest(fl.guest_seg(kAck, kGuestIss + 11, kIss + 11));
    CHECK(due(r).empty());
    CHECK(r.reaped() == 0);
    // Its ACK of the FIN: both resets, at the FIN's end.
    r.from_guest(fl.guest_seg(kAck, kGuestIss + 11, kIss + 12));
    check_resets(due(r), fl, kRst, kGuestIss + 11, 0, kRst | kAck, kIss + 12, kGuestIss + 11);
    CHECK(r.reaped() == 1);
    // A duplicate of that ACK: nothing more.
    r.from_guest(fl.guest_seg(kAck, kGuestIss + 11, kIss + 12));
    CHECK(due(r).empty());
}

TEST_CASE_FIXTURE(Tracked4,
                  "forward reaper: a clean close after the FIN's ACK ends it at once") {
    fl.handshake(r);
    r.from_slirp(fl.slirp(kFin | kAck, kIss + 1, kGuestIss + 1));
    r.from_guest(fl.guest_seg(kAck, kGuestIss + 1, kIss + 2));
    CHECK(due(r).empty());
    r.host_gone(c.accepted.get(), false);
    check_resets(due(r), fl, kRst, kGuestIss + 1, 0, kRst | kAck, kIss + 2, kGuestIss + 1);
}

TEST_CASE_FIXTURE(Tracked4,
                  "forward reaper: a reset in SYN_SENT acknowledges libslirp's SYN") {
    r.from_slirp(fl.slirp(kSyn, kIss, 0)); // the guest has not answered
    r.host_gone(c.accepted.get(), true);
    check_resets(due(r), fl, kRst | kAck, 0, kIss + 1, kRst, kIss + 1, 0);
    CHECK(r.reaped() == 1);
}

TEST_CASE_FIXTURE(Tracked4, "forward reaper: no frame of libslirp's seen, no reset") {
    r.host_gone(c.accepted.get(), true);
    CHECK(due(r).empty());
    CHECK(r.reaped() == 0);
}

TEST_CASE_FIXTURE(Tracked4, "forward reaper: a socket libslirp let go is not reset") {
    fl.handshake(r);
    r.on_unregister(c.accepted.get());
    CHECK(r.tracked() == 0);
    r.host_gone(c.accepted.get(), true);
    CHECK(due(r).empty());
    // Nor another connection's frames on a tuple it no longer tracks.
    fl.exchange(r);
    r.host_gone(c.accepted.get(), false);
    CHECK(due(r).empty());
    CHECK(r.reaped() == 0);
}

TEST_CASE_FIXTURE(Forwarded4, "forward reaper: a client on 127.0.0.2 is the gateway too") {
    // libslirp shows every client on 127.0.0.0/8 as 10.0.2.2.
    HostConn c = connect_pair(l, "127.0.0.1", "127.0.0.2");
    REQUIRE(r.on_register(c.accepted.get()));
    const Tuple other(c.cport, "127.0.0.2"); // not how libslirp shows it
    other.handshake(r);
    r.host_gone(c.accepted.get(), true);
    CHECK(due(r).empty());
    HostConn c2 = connect_pair(l, "127.0.0.1", "127.0.0.2");
    REQUIRE(r.on_register(c2.accepted.get()));
    const Tuple fl(c2.cport);
    fl.handshake(r);
    r.host_gone(c2.accepted.get(), true);
    check_resets(due(r), fl, kRst, kGuestIss + 1, 0, kRst | kAck, kIss + 1, kGuestIss + 1);
}

TEST_CASE_FIXTURE(Forwarded4,
                  "forward reaper: of two connections on one tuple, the newest is tracked") {
    // 127.0.0.1:P and 127.0.0.2:P are both 10.0.2.2:P to the guest: the
    // twins libslirp holds when a client reconnects from its port.
    HostConn old = connect_pair(l, "127.0.0.1", "127.0.0.1");
    REQUIRE(r.on_register(old.accepted.get()));
    const Tuple fl(old.cport);
    fl.handshake(r);
    HostConn twin = connect_pair(l, "127.0.0.1", "127.0.0.2", old.cport);
    REQUIRE(twin.cport == old.cport);
    REQUIRE(r.on_register(twin.accepted.get()));
    CHECK(r.tracked() == 1);
    // libslirp's SYN of the new one; the old socket's hangup and its
    // unregistering leave it alone.
    r.from_slirp(fl.slirp(kSyn, kIss + 7000, 0));
    r.host_gone(old.accepted.get(), true);
    CHECK(due(r).empty());
    r.on_unregister(old.accepted.get());
    CHECK(r.tracked() == 1);
    r.host_gone(twin.accepted.get(), true);
    check_resets(due(r), fl, kRst | kAck, 0, kIss + 7001, kRst, kIss + 7001, 0);
}

TEST_CASE("forward reaper: a client on a host address keeps it") {
    // In a namespace of the test's own: 192.0.2.1 on its lo.
    testns::in_own_netns({}, [](bool) {
        Listener l(false, "0.0.0.0");
        REQUIRE(l.port != 0);
        ForwardReaper r = make_reaper();
        r.add_forward(tcp_forward(l.port, false, "0.0.0.0"));
        HostConn c = connect_pair(l, "192.0.2.1", "192.0.2.1");
        REQUIRE(r.on_register(c.accepted.get()));
        const Tuple gw(c.cport); // shown as the gateway: not its key
        gw.handshake(r);
        r.host_gone(c.accepted.get(), true);
        CHECK(due(r).empty());
        HostConn c2 = connect_pair(l, "192.0.2.1", "192.0.2.1");
        REQUIRE(r.on_register(c2.accepted.get()));
        const Tuple fl(c2.cport, "192.0.2.1");
        fl.handshake(r);
        r.host_gone(c2.accepted.get(), true);
        check_resets(due(r), fl, kRst, kGuestIss + 1, 0, kRst | kAck, kIss + 1, kGuestIss + 1);
    });
}

TEST_CASE("forward reaper: a client on ::1 is the IPv6 gateway") {
    Listener l(true);
    if (l.port == 0) {
        MESSAGE("skipped: no ::1 listener");
        return;
    }
    ForwardReaper r = make_reaper();
    r.add_forward(tcp_forward(l.port, true));
    HostConn c = connect_pair(l, "::1");
    REQUIRE(r.on_register(c.accepted.get()));
    const Tuple fl(c.cport, "fd00::2");
    fl.handshake(r);
    fl.exchange(r);
    r.host_gone(c.accepted.get(), true);
    check_resets(due(r), fl, kRst, kGuestIss + 11, 0, kRst | kAck, kIss + 11, kGuestIss + 11);
    // An IPv4 forward of the same port number is not the IPv6 one's.
    ForwardReaper r4 = make_reaper();
    r4.add_forward(tcp_forward(l.port));
    HostConn c2 = connect_pair(l, "::1");
    CHECK_FALSE(r4.on_register(c2.accepted.get()));
}

TEST_CASE_FIXTURE(Tracked4,
                  "forward reaper: a removed forward's new connections are not tracked") {
    r.remove_forward(tcp_forward(l.port));
    HostConn c2 = connect_pair(l, "127.0.0.1");
    CHECK_FALSE(r.on_register(c2.accepted.get()));
    CHECK(r.tracked() == 1); // the one libslirp still holds
    // Added again: tracked again.
    r.add_forward(tcp_forward(l.port));
    HostConn c3 = connect_pair(l, "127.0.0.1");
    CHECK(r.on_register(c3.accepted.get()));
}

// Two forwards on one port with different host addresses (the parent's
// table holds both: same_host_side): removing one keeps the other's.
TEST_CASE("forward reaper: removing one host address's forward keeps the other's") {
    Listener one(false, "127.0.0.1");
    REQUIRE(one.port != 0);
    // The same port on 127.0.0.2.
    Listener two(false, "127.0.0.2");
    ::close(two.fd);
    two.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(one.port);
    inet_pton(AF_INET, "127.0.0.2", &a.sin_addr);
    REQUIRE(::bind(two.fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
    REQUIRE(::listen(two.fd, 16) == 0);
    two.port = one.port;

    ForwardReaper r = make_reaper();
    r.add_forward(tcp_forward(one.port, false, "127.0.0.1"));
    r.add_forward(tcp_forward(one.port, false, "127.0.0.2"));
    r.remove_forward(tcp_forward(one.port, false, "127.0.0.2"));
    HostConn kept = connect_pair(one, "127.0.0.1");
    CHECK(r.on_register(kept.accepted.get()));
    HostConn gone = connect_pair(two, "127.0.0.2");
    CHECK_FALSE(r.on_register(gone.accepted.get()));
}
