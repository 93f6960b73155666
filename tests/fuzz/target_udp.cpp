// SPDX-License-Identifier: Apache-2.0

// Fuzz target: the UDP fast path (plugin/datapath/udp/fastpath.hpp) driven
// by guest datagrams, raw frames, host replies, clock jumps and tap loss,
// against real UDP servers in the target's private network namespace
// (net_isolation.hpp). One FastPath per input, with a test clock.
//
// Payload bytes are not taken from the input: a guest datagram carries
// guest_byte(0), guest_byte(1), ... and a host datagram host_byte(0), ...,
// whatever its length, so the target can tell a cut, shifted or misplaced
// datagram (a coalesced read split at the wrong place, a segmented send
// cut wrongly) from a good one without knowing which host socket serves
// which flow.
//
// Properties (fuzz::require):
// - every guest-bound frame passes udp_check.hpp's GuestCheck (lengths,
//   MTU, vnet offsets, checksums once completed, fragments in order and
//   reassembling to a valid datagram, ICMP errors quoting the guest's
//   datagram) and belongs to a 4-tuple the guest sent from (known());
//   its bytes are the host's (payload_ok());
// - the fast path's counters match what the guest saw: datagrams_to_guest,
//   fragmented, icmp_to_guest; the guest never gets more datagrams than
//   the servers sent;
// - the servers receive only guest bytes (unless a raw frame reached
//   them) and at most datagrams_to_host datagrams;
// - the verdict of a well-formed datagram: NotMine for libslirp's (DNS,
//   the virtual network, broadcast and multicast, DHCP, port 0, IPv6 when
//   off, the gateway with disable_host_loopback, a guest end kept for a
//   libslirp forward), Consumed otherwise;
// - flows() <= max_flows; no deadline due after run_timers(); no flow and
//   no timer after tap_detached(); no descriptor left after the input.
//
// Input: config byte c (max_flows = 1 + (c & 7); bits 3-4 MTU 65520 /
// 1500 / 1280 / 9000; 0x20 no UDP_SEGMENT/UDP_GRO; 0x40
// disable_host_loopback; 0x80 IPv6 off), an admission byte (bit i: the
// i-th new flow, mod 8, is refused: Reset, or Drop when bit i+1 is set
// too), then up to kMaxRecords records, each an op byte whose low two
// bits say what follows (integers LE; reads past the end give zeros):
//   0 guest datagram: op bits 2-4 tuple (kTuples), 0x20 mangle, 0x40
//     custom destination and ports, 0x80 flush() after; u8 source port
//     (40000 + (b & 31)); u16 payload length; [custom: u8 destination
//     (kDests of the tuple's family), u16 source port, u16 destination
//     port]; [mangle: u8 field, u8 value: a header byte other than the
//     addresses and ports, or the frame cut / padded];
//   1 host action, server (op >> 2) & 3 (kServers): (op >> 4) & 3 = 0 read
//     what is queued (remembering up to 16 senders), 1 reply u16 bytes
//     (+ 64 KiB if op & 0x40, capped at the family's maximum) to sender
//     u8 (0: the most recent one), 2 a burst to sender u8: u8 count + 1
//     datagrams of u16 + 1 bytes
//     in one UDP_SEGMENT send (a coalesced read on a UDP_GRO socket), 3
//     u16 bytes to sender u8 from another socket (the connected flow
//     socket must drop it);
//   2 clock: u16 ms (x 1024 if op & 4), then run_timers() unless op & 8;
//   3 (op >> 2) & 3 = 0 poll_events(); 1 flush(), or with op & 0x10
//     keep_for_libslirp (op & 0x20: release_to_fast_path) of guest end
//     10.0.2.100:(40000 + (op >> 6)); 2 tap_detached(); 3 a raw frame: u16
//     length, bytes.
// Host side: UDP servers on 0.0.0.0 and [::] ports 8080 and 8081 (8081
// with the smallest receive buffer, so it drops), nothing on 8082 (port
// unreachable). lo also holds 192.0.2.1 and 2001:db8::1, so "outside"
// destinations (Route::Host) reach the same servers; 198.51.100.1 and
// 2001:db8:ffff::1 have no route (the flow's connect fails).
#include <arpa/inet.h>
#include <linux/ipv6.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <optional>
#include <vector>

#include "../lib/udp_segment.hpp"
#include "datapath/checksum.hpp"
#include "datapath/udp/fastpath.hpp"
#include "fuzz_input.hpp"
#include "net_isolation.hpp"
#include "tcp_host.hpp"
#include "udp_check.hpp"

using namespace rknp;
using namespace rknp::udp;
using fuzz::udpcheck::FlowKey;

namespace {

using Bytes = std::vector<uint8_t>;

constexpr size_t kMaxRecords = 256;
constexpr uint8_t kGuestMac[6] = {0x02, 0, 0, 0, 0, 0x64};
constexpr size_t kMaxV4Payload = 65507, kMaxV6Payload = 65527;

uint8_t guest_byte(size_t i) { return fuzz::tcp_host::stream_byte(uint32_t(i)); }
uint8_t host_byte(size_t i) { return fuzz::tcp_host::stream_byte(uint32_t(i) + 0x40000000u); }

// Where a destination goes, as the fast path should see it.
enum class Kind { Gateway, Outside, Libslirps };
struct Dest {
    const char *addr;
    Kind kind;
};
constexpr Dest kDests4[] = {
    {"10.0.2.2", Kind::Gateway},     {"192.0.2.1", Kind::Outside},
    {"198.51.100.1", Kind::Outside}, {"10.0.2.3", Kind::Libslirps},
    {"10.0.2.77", Kind::Libslirps},  {"255.255.255.255", Kind::Libslirps},
    {"224.0.0.251", Kind::Libslirps}, {"127.0.0.1", Kind::Libslirps},
};
constexpr Dest kDests6[] = {
    {"fd00::2", Kind::Gateway},          {"2001:db8::1", Kind::Outside},
    {"2001:db8:ffff::1", Kind::Outside}, {"fd00::3", Kind::Libslirps},
    {"fd00::77", Kind::Libslirps},       {"ff02::1", Kind::Libslirps},
    {"fe80::1", Kind::Libslirps},        {"::1", Kind::Libslirps},
};
static_assert(std::size(kDests4) == 8 && std::size(kDests6) == 8);

// A named function rather than `v6 ? kDests6 : kDests4`: GCC's Debug build
// with sanitizers takes that conditional for a temporary and warns.
const Dest &dest_of(bool v6, unsigned index) {
    return v6 ? kDests6[index % 8] : kDests4[index % 8];
}

struct Tuple {
    bool v6;
    uint8_t dest; // index into kDests4 / kDests6
    uint16_t dport;
};
constexpr Tuple kTuples[8] = {
    {false, 0, 8080}, // gateway: 127.0.0.1:8080
    {false, 0, 8081}, // 127.0.0.1:8081, small receive buffer
    {true, 0, 8080},  // [::1]:8080
    {true, 0, 8081},  // [::1]:8081
    {false, 0, 8082}, // nothing listens: port unreachable
    {true, 0, 8082},
    {false, 1, 8080}, // 192.0.2.1 on lo: Route::Host to a server
    {true, 1, 8080},  // 2001:db8::1
};

// The servers: any address, so the gateway's and the outside addresses
// reach them.
struct Server {
    bool v6;
    uint16_t port;
    bool small;
    int fd = -1;
    std::vector<sockaddr_storage> peers; // senders seen, most recent last
};
Server servers[4] = {{false, 8080, false, -1, {}}, {false, 8081, true, -1, {}},
                     {true, 8080, false, -1, {}}, {true, 8081, true, -1, {}}};

void open_server(Server &s) {
    s.fd = ::socket(s.v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s.fd < 0) fuzz::fail("server socket");
    int one = 1;
    if (s.v6) ::setsockopt(s.fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (s.small) {
        int sz = 1; // the kernel's minimum
        ::setsockopt(s.fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    }
    sockaddr_storage ss{};
    socklen_t len;
    if (s.v6) {
        auto *a = reinterpret_cast<sockaddr_in6 *>(&ss);
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_any;
        a->sin6_port = htons(s.port);
        len = sizeof *a;
    } else {
        auto *a = reinterpret_cast<sockaddr_in *>(&ss);
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_ANY);
        a->sin_port = htons(s.port);
        len = sizeof *a;
    }
    if (::bind(s.fd, reinterpret_cast<sockaddr *>(&ss), len) < 0) fuzz::fail("server bind");
}

// 192.0.2.1 and 2001:db8::1 on lo, in the private namespace only.
void outside_addresses() {
    int s4 = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq ifr{};
    std::strcpy(ifr.ifr_name, "lo:1");
    auto *a = reinterpret_cast<sockaddr_in *>(&ifr.ifr_addr);
    a->sin_family = AF_INET;
    inet_pton(AF_INET, "192.0.2.1", &a->sin_addr);
    if (s4 < 0 || ::ioctl(s4, SIOCSIFADDR, &ifr) < 0) std::perror("fuzz: 192.0.2.1 on lo");
    if (s4 >= 0) ::close(s4);
    int s6 = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    in6_ifreq r6{};
    inet_pton(AF_INET6, "2001:db8::1", &r6.ifr6_addr);
    r6.ifr6_prefixlen = 128;
    r6.ifr6_ifindex = int(if_nametoindex("lo"));
    if (s6 < 0 || ::ioctl(s6, SIOCSIFADDR, &r6) < 0) std::perror("fuzz: 2001:db8::1 on lo");
    // The new address is tentative until the kernel's (immediate, but
    // asynchronous) duplicate address detection on lo is done: until a
    // socket can bind to it, datagrams to it are unreachable.
    sockaddr_in6 a6{};
    a6.sin6_family = AF_INET6;
    a6.sin6_addr = r6.ifr6_addr;
    for (int i = 0; s6 >= 0 && i < 200; ++i) {
        int t = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        const bool ok = t >= 0 && ::bind(t, reinterpret_cast<sockaddr *>(&a6), sizeof a6) == 0;
        if (t >= 0) ::close(t);
        if (ok) break;
        ::usleep(10000);
    }
    if (s6 >= 0) ::close(s6);
}

class Harness {
public:
    explicit Harness(fuzz::Input &in) : in_(in) {
        const uint8_t c = in.u8();
        admit_mask_ = in.u8();
        cfg_.max_flows = 1 + (c & 7);
        static const uint32_t mtus[4] = {65520, 1500, 1280, 9000};
        cfg_.mtu = mtus[(c >> 3) & 3];
        cfg_.segmentation = (c & 0x20) == 0;
        cfg_.disable_host_loopback = (c & 0x40) != 0;
        cfg_.ipv6 = (c & 0x80) == 0;
        inet_pton(AF_INET6, "fd00::", &cfg_.prefix6);
        inet_pton(AF_INET6, "fd00::2", &cfg_.gateway6);
        inet_pton(AF_INET6, "fd00::3", &cfg_.dns6);
        cfg_.clock = [this] { return now_; };
        cfg_.admit_flow = [this] { return admit(); };
        check_.mtu = cfg_.mtu;
        check_.trace = trace_;
        check_.known = [this](const FlowKey &k) {
            return (pending_ && *pending_ == k) ||
                   std::find(keys_.begin(), keys_.end(), k) != keys_.end();
        };
        check_.payload_ok = [](std::span<const uint8_t> p) {
            for (size_t i = 0; i < p.size(); ++i)
                if (p[i] != host_byte(i)) return false;
            return true;
        };
        fp_ = std::make_unique<FastPath>(cfg_, check_);
        inet_pton(AF_INET, "10.0.2.100", guest4_);
        inet_pton(AF_INET6, "fd00::100", guest6_);
    }

    void run() {
        for (size_t r = 0; r < kMaxRecords && in_.left() > 0; ++r) {
            const uint8_t op = in_.u8();
            switch (op & 3) {
            case 0:
                guest_datagram(op);
                break;
            case 1:
                host_action(op);
                break;
            case 2: {
                const int64_t ms = int64_t(in_.u16()) * ((op & 4) ? 1024 : 1);
                now_ += ms;
                trace("clock +%lld\n", (long long)ms);
                if (op & 8) break;
                fp_->run_timers(now_);
                fuzz::require(fp_->ms_until_next_timer(now_) != 0,
                              "a deadline is still due after run_timers");
                break;
            }
            case 3:
                other(op);
                break;
            }
            check_invariants();
        }
    }

    void finish() {
        trace("stats opened %llu refused %llu expired %llu to_host %llu to_guest %llu "
              "dropped %llu segmented %llu fragmented %llu icmp %llu malformed %llu\n",
              (unsigned long long)fp_->stats().flows_opened,
              (unsigned long long)fp_->stats().flows_refused,
              (unsigned long long)fp_->stats().flows_expired,
              (unsigned long long)fp_->stats().datagrams_to_host,
              (unsigned long long)fp_->stats().datagrams_to_guest,
              (unsigned long long)fp_->stats().dropped_to_host,
              (unsigned long long)fp_->stats().segmented_sends,
              (unsigned long long)fp_->stats().fragmented,
              (unsigned long long)fp_->stats().icmp_to_guest,
              (unsigned long long)fp_->stats().malformed);
        fp_->flush();
        for (Server &s : servers) drain(s);
        fuzz::require(host_received_ <= fp_->stats().datagrams_to_host,
                      "servers received more datagrams than the fast path sent");
        fp_.reset();
        // Nothing of this input is left for the next one.
        for (Server &s : servers) {
            uint8_t b[1];
            while (::recv(s.fd, b, sizeof b, MSG_DONTWAIT | MSG_TRUNC) >= 0) {
            }
            s.peers.clear();
        }
    }

private:
    __attribute__((format(printf, 2, 3))) void trace(const char *fmt, ...) {
        if (!trace_) return;
        va_list ap;
        va_start(ap, fmt);
        std::vfprintf(stderr, fmt, ap);
        va_end(ap);
    }

    Admission admit() {
        const unsigned i = admissions_++ % 8;
        if (!(admit_mask_ >> i & 1)) return Admission::Accept;
        return (admit_mask_ >> ((i + 1) % 8) & 1) ? Admission::Drop : Admission::Reset;
    }

    // Changes one header byte that neither moves nor relabels the payload
    // (addresses and ports stay), or cuts or pads the frame.
    void mangle(Bytes &f, bool v6) {
        // IPv4 byte 0: the version only (a longer header would move the
        // UDP header into the payload).
        static const uint8_t ip4[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
        static const uint8_t ip6[] = {0, 1, 2, 3, 4, 5, 6, 7};
        static const uint8_t udp[] = {4, 5, 6, 7};
        const size_t nip = v6 ? std::size(ip6) : std::size(ip4);
        const size_t nfields = 2 + nip + std::size(udp); // 2: the ethertype
        const uint8_t which = in_.u8(), value = in_.u8();
        const size_t ip = kEthLen, uh = ip + (v6 ? kIp6Len : kIp4Len);
        const size_t k = which % (nfields + 2);
        if (k < 2) {
            f[12 + k] = value;
        } else if (k == 2 && !v6) {
            f[ip] = uint8_t((value & 0xf0) | 5);
        } else if (k < 2 + nip) {
            f[ip + (v6 ? ip6[k - 2] : ip4[k - 2])] = value;
        } else if (k < nfields) {
            f[uh + udp[k - 2 - nip]] = value;
        } else if (k == nfields) {
            f.resize(f.size() * value / 256);
        } else {
            f.resize(f.size() + value, 0);
        }
    }

    static Bytes frame(bool v6, const uint8_t src[16], const uint8_t dst[16], uint16_t sport,
                       uint16_t dport, size_t len) {
        const size_t iplen = v6 ? kIp6Len : kIp4Len, udp_len = 8 + len;
        Bytes f(kEthLen + iplen + udp_len);
        uint8_t *p = f.data();
        std::memset(p, 0x52, 6);
        std::memcpy(p + 6, kGuestMac, 6);
        uint8_t *ip = p + kEthLen;
        if (!v6) {
            put_be16(p + 12, 0x0800);
            ip[0] = 0x45;
            put_be16(ip + 2, uint16_t(iplen + udp_len));
            ip[8] = 64;
            ip[9] = kProtoUdp;
            std::memcpy(ip + 12, src + 12, 4);
            std::memcpy(ip + 16, dst + 12, 4);
            put_be16(ip + 10, uint16_t(~csum_fold(csum_add(0, ip, kIp4Len))));
        } else {
            put_be16(p + 12, 0x86dd);
            ip[0] = 0x60;
            put_be16(ip + 4, uint16_t(udp_len));
            ip[6] = kProtoUdp;
            ip[7] = 64;
            std::memcpy(ip + 8, src, 16);
            std::memcpy(ip + 24, dst, 16);
        }
        uint8_t *u = ip + iplen;
        put_be16(u, sport);
        put_be16(u + 2, dport);
        put_be16(u + 4, uint16_t(udp_len));
        for (size_t i = 0; i < len; ++i) u[8 + i] = guest_byte(i);
        const uint64_t sum = fuzz::udpcheck::pseudo_header(v6, src, dst, udp_len, kProtoUdp);
        const uint16_t c = uint16_t(~csum_fold(csum_add(sum, u, udp_len)));
        put_be16(u + 6, c == 0 ? 0xffff : c);
        return f;
    }

    bool kept(uint16_t port) const {
        return std::count(kept_.begin(), kept_.end(), port) > 0;
    }

    void guest_datagram(uint8_t op) {
        const Tuple &t = kTuples[(op >> 2) & 7];
        const bool v6 = t.v6;
        uint16_t sport = uint16_t(40000 + (in_.u8() & 31)), dport = t.dport;
        size_t len = in_.u16();
        const Dest *dest = &dest_of(v6, t.dest);
        if (op & 0x40) {
            dest = &dest_of(v6, in_.u8());
            sport = in_.u16();
            dport = in_.u16();
        }
        len = std::min(len, v6 ? kMaxV6Payload : kMaxV4Payload);
        uint8_t src[16], dst[16];
        if (v6) {
            std::memcpy(src, guest6_, 16);
            inet_pton(AF_INET6, dest->addr, dst);
        } else {
            uint8_t d4[4];
            inet_pton(AF_INET, dest->addr, d4);
            map_v4(guest4_, src);
            map_v4(d4, dst);
        }
        Bytes f = frame(v6, src, dst, sport, dport, len);
        const bool mangled = (op & 0x20) != 0;
        if (mangled) mangle(f, v6);
        trace("-> %s %s %u -> %u len %zu%s\n", v6 ? "v6" : "v4", dest->addr, sport, dport, len,
              mangled ? " mangled" : "");
        // An ICMP unreachable for a flow that cannot connect reaches the
        // guest during the call: its 4-tuple is known while it runs.
        pending_ = flow_of(f);
        const Verdict v = fp_->guest_frame(f);
        pending_.reset();
        if (!mangled) {
            bool mine = dest->kind != Kind::Libslirps && sport != 0 && dport != 0 && dport != 67 &&
                        (!v6 || cfg_.ipv6) &&
                        !(dest->kind == Kind::Gateway && cfg_.disable_host_loopback) &&
                        (v6 || !kept(sport));
            fuzz::require((v == Verdict::Consumed) == mine, "verdict of a well-formed datagram");
        }
        if (v == Verdict::Consumed) note_flow(f);
        if (op & 0x80) fp_->flush();
        check_.require_idle();
    }

    // The 4-tuple of a frame (what it parses to, mangled or raw).
    static std::optional<FlowKey> flow_of(std::span<const uint8_t> f) {
        Datagram d;
        if (parse_datagram(f, d) != Parse::Ok) return std::nullopt;
        FlowKey k;
        k.v6 = d.v6;
        std::memcpy(k.guest, d.src, 16);
        std::memcpy(k.remote, d.dst, 16);
        k.guest_port = d.sport;
        k.remote_port = d.dport;
        return k;
    }
    // That of a consumed frame, remembered.
    void note_flow(std::span<const uint8_t> f) {
        const std::optional<FlowKey> k = flow_of(f);
        if (k && std::find(keys_.begin(), keys_.end(), *k) == keys_.end()) keys_.push_back(*k);
    }

    void drain(Server &s) {
        static uint8_t buf[65536];
        for (;;) {
            sockaddr_storage from{};
            socklen_t fl = sizeof from;
            const ssize_t n = ::recvfrom(s.fd, buf, sizeof buf, MSG_DONTWAIT,
                                         reinterpret_cast<sockaddr *>(&from), &fl);
            if (n < 0) break;
            ++host_received_;
            trace("  server got %zd\n", n);
            if (!raw_consumed_)
                for (ssize_t i = 0; i < n; ++i)
                    fuzz::require(buf[i] == guest_byte(size_t(i)),
                                  "a server received bytes the guest did not send");
            auto same = [&](const sockaddr_storage &p) { return !std::memcmp(&p, &from, fl); };
            if (std::find_if(s.peers.begin(), s.peers.end(), same) == s.peers.end()) {
                if (s.peers.size() == 16) s.peers.erase(s.peers.begin());
                s.peers.push_back(from);
            }
        }
    }

    // Sends n bytes (segments of seg if seg < n) to a peer from fd.
    bool send_to(int fd, const sockaddr_storage &to, size_t n, size_t seg) {
        static uint8_t buf[65536];
        for (size_t i = 0; i < n; ++i) buf[i] = host_byte(seg < n ? i % seg : i);
        return send_segmented(fd, to, {buf, n}, seg, MSG_DONTWAIT) >= 0;
    }

    void host_action(uint8_t op) {
        Server &s = servers[(op >> 2) & 3];
        const unsigned action = (op >> 4) & 3;
        if (action == 0) {
            trace("server %u read\n", (op >> 2) & 3);
            drain(s);
            return;
        }
        const uint8_t peer = in_.u8();
        const size_t max = s.v6 ? kMaxV6Payload : kMaxV4Payload;
        if (action == 2) {
            const size_t count = size_t(in_.u8()) + 1, seg = size_t(in_.u16()) + 1;
            const size_t n = std::min(count * seg, max);
            trace("server %u burst %zu x %zu\n", (op >> 2) & 3, count, seg);
            if (s.peers.empty()) return;
            if (send_to(s.fd, s.peers[s.peers.size() - 1 - peer % s.peers.size()], n, seg))
                host_sent_ += (n + seg - 1) / seg;
            return;
        }
        const size_t n = std::min<size_t>(in_.u16() + ((op & 0x40) ? 0x10000 : 0), max);
        trace("server %u %s %zu\n", (op >> 2) & 3, action == 1 ? "reply" : "stray", n);
        if (s.peers.empty()) return;
        const sockaddr_storage &to = s.peers[s.peers.size() - 1 - peer % s.peers.size()];
        if (action == 1) {
            if (send_to(s.fd, to, n, n)) ++host_sent_;
            return;
        }
        // From an unbound socket: the flow's connected socket drops it.
        int fd = ::socket(s.v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return;
        (void)send_to(fd, to, n, n);
        ::close(fd);
    }

    void other(uint8_t op) {
        switch ((op >> 2) & 3) {
        case 0:
            trace("poll\n");
            fp_->poll_events();
            break;
        case 1: {
            if (!(op & 0x10)) {
                trace("flush\n");
                fp_->flush();
                break;
            }
            const uint16_t port = uint16_t(40000 + (op >> 6));
            const uint32_t g4 = 0x0a000264;
            trace("%s %u\n", (op & 0x20) ? "release" : "keep", port);
            if (op & 0x20) {
                auto it = std::find(kept_.begin(), kept_.end(), port);
                if (it != kept_.end()) kept_.erase(it);
                fp_->release_to_fast_path(g4, port);
            } else if (kept_.size() < 64) {
                kept_.push_back(port);
                fp_->keep_for_libslirp(g4, port);
            }
            break;
        }
        case 2:
            trace("tap detached\n");
            fp_->tap_detached();
            fuzz::require(fp_->flows() == 0, "flows left after tap_detached");
            fuzz::require(fp_->ms_until_next_timer(now_) == -1, "timers left after tap_detached");
            break;
        case 3: {
            const size_t len = in_.u16();
            auto bytes = in_.bytes(len);
            Bytes f(bytes.begin(), bytes.end()); // exact size: overreads show
            trace("-> raw %zu\n", f.size());
            // As in guest_datagram(): an ICMP unreachable may answer it during the call.
            pending_ = flow_of(f);
            const Verdict v = fp_->guest_frame(f);
            pending_.reset();
            if (v == Verdict::Consumed) {
                Datagram d;
                if (parse_datagram(f, d) == Parse::Ok) raw_consumed_ = true;
                note_flow(f);
            }
            break;
        }
        }
        check_.require_idle();
    }

    void check_invariants() {
        const FastPathStats &st = fp_->stats();
        fuzz::require(fp_->flows() <= cfg_.max_flows, "more flows than max_flows");
        fuzz::require(st.datagrams_to_guest == check_.datagrams,
                      "datagrams_to_guest is not what the guest got");
        fuzz::require(st.fragmented == check_.fragmented,
                      "fragmented is not what the guest got in fragments");
        fuzz::require(st.icmp_to_guest == check_.icmp, "icmp_to_guest is not what the guest got");
        fuzz::require(check_.datagrams <= host_sent_,
                      "the guest got more datagrams than the servers sent");
    }

    fuzz::Input &in_;
    // RKNP_FUZZ_TRACE=1: the records and the fast path's counters on stderr.
    const bool trace_ = std::getenv("RKNP_FUZZ_TRACE") != nullptr;
    FastPathConfig cfg_;
    uint8_t admit_mask_ = 0;
    unsigned admissions_ = 0;
    int64_t now_ = 1'000'000;
    fuzz::udpcheck::GuestCheck check_;
    std::unique_ptr<FastPath> fp_;
    uint8_t guest4_[4]{}, guest6_[16]{};
    std::vector<FlowKey> keys_;
    std::optional<FlowKey> pending_; // the datagram guest_frame() has now
    std::vector<uint16_t> kept_;
    uint64_t host_sent_ = 0, host_received_ = 0;
    bool raw_consumed_ = false;
};

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    fuzz::isolate_network();
    outside_addresses();
    for (Server &s : servers) open_server(s);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const size_t fds_before = fuzz::tcp_host::count_fds();
    {
        fuzz::Input in(data, size);
        Harness h(in);
        h.run();
        h.finish();
    }
    fuzz::require(fuzz::tcp_host::count_fds() == fds_before, "descriptors left after the input");
    return 0;
}
