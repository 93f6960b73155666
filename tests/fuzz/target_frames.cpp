// SPDX-License-Identifier: Apache-2.0

// Fuzz target: the frame path from the tap into the stack, as
// StackLoop::input_frame runs it: prepare_guest_frame (strips the
// virtio-net header, completes a partial checksum, drops bogus frames), IPv4
// fragments through Ipv4Reassembler, ARP/IPv4/IPv6 from the guest's own
// addresses only and URG cleared
// (guest_filter.hpp), then slirp_input into a libslirp
// instance configured like stack_loop.cpp's; libslirp's replies go through
// the Coalescer like stack -> guest frames do. Every raw frame is also fed
// to a second Coalescer directly, whose output is checked for consistency.
// Guest TCP reaches real connections: the private namespace has listeners
// on 127.0.0.1:8080 and [::1]:8080 (the gateway's port 8080) that accept,
// echo what they read and close on a guest FIN, so reassembly, urgent data,
// window and teardown paths run; the 4.7.0 reassembly-loop guard and the
// router-message filter sit in front of libslirp as in SlirpAdapter.
//
// Input: one config byte, then records {op u8, len u16 LE, bytes}; a record
// may be truncated by the end of the input. op bits 0-3: advance the clock
// by n * 100 ms first; bit 4: poll host sockets afterwards; bit 5: add
// 64 KiB to len (oversized frames are cut like read() into the tap buffer
// would cut them); bit 6: a TCP segment's acknowledgement number is
// replaced by the next sequence libslirp will send on that connection (its
// checksum redone), as a guest that read the SYN-ACK would: libslirp is not
// instrumented, so the fuzzer could not learn its ISN otherwise.
#include <arpa/inet.h>
#include <poll.h>
#include <slirp/libslirp.h>

#include <cstring>
#include <vector>

#include "datapath/checksum.hpp"
#include "fuzz_input.hpp"
#include "net_isolation.hpp"
#include "datapath/coalescer.hpp"
#include "datapath/guest_filter.hpp"
#include "datapath/offload.hpp"
#include "slirp/reass_wrap_guard.hpp"
#include "datapath/reassembly.hpp"
#include "datapath/tcp/frame.hpp"
#include "slirp/queue_drain.hpp"
#include "slirp/timers.hpp"

using namespace rknp;

namespace {

constexpr size_t kMaxRecords = 64;

// Accounts for what a Coalescer emits and checks every frame with a
// partial checksum (merged or not).
struct OutputCheck final : GuestSink {
    uint64_t bytes_in = 0, bytes_out = 0;

    void write_frame(const VnetHdr &h, std::span<const uint8_t> head,
                     std::span<const uint8_t> rest) override {
        std::vector<uint8_t> f(head.begin(), head.end());
        f.insert(f.end(), rest.begin(), rest.end());
        if (h.gso_type == 0 && h.flags == 0) {
            bytes_out += f.size();
            return;
        }
        fuzz::require(h.flags == kVnetNeedsCsum, "flags other than NEEDS_CSUM");
        fuzz::require(h.hdr_len < f.size() && f.size() <= 14 + 65535,
                      "partial-checksum frame sizes");
        bool v6;
        if (h.gso_type == 0) { // one segment with a partial checksum
            v6 = be16(f.data() + 12) == 0x86dd;
            bytes_out += f.size();
        } else {
            fuzz::require(h.gso_type == kVnetGsoTcp4 || h.gso_type == kVnetGsoTcp6,
                          "unknown gso type");
            fuzz::require(h.gso_size > 0, "gso frame without gso_size");
            size_t payload = f.size() - h.hdr_len;
            size_t segs = (payload + h.gso_size - 1) / h.gso_size;
            fuzz::require(segs >= 2, "gso frame of one segment");
            bytes_out += f.size() + (segs - 1) * h.hdr_len;
            v6 = h.gso_type == kVnetGsoTcp6;
        }
        // The IP length must cover the frame, and completing the partial
        // checksum must give a valid TCP checksum.
        size_t ip_len = v6 ? 40 + be16(f.data() + 18) : be16(f.data() + 16);
        fuzz::require(14 + ip_len == f.size(), "IP length of merged frame");
        std::vector<uint8_t> copy(f.begin(), f.end());
        fuzz::require(complete_checksum(copy, h), "merged frame csum offsets");
        size_t l4 = h.csum_start, l4_len = copy.size() - l4;
        uint64_t sum = v6 ? csum_add(0, copy.data() + 22, 32)
                          : csum_add(0, copy.data() + 26, 8);
        uint8_t tail[8] = {0, 0, uint8_t(l4_len >> 8), uint8_t(l4_len), 0, 0, 0, 6};
        sum = v6 ? csum_add(sum, tail, 8) : csum_add(sum, tail + 2, 2) ;
        if (!v6) {
            uint8_t proto[2] = {0, 6};
            sum = csum_add(sum, proto, 2);
            // Rebuilt for merged frames (a single one keeps its header).
            if (h.gso_type != 0)
                fuzz::require(csum_fold(csum_add(0, copy.data() + 14, 20)) == 0xffff,
                              "IPv4 header checksum of merged frame");
        }
        sum = csum_add(sum, copy.data() + l4, l4_len);
        fuzz::require(csum_fold(sum) == 0xffff, "TCP checksum of merged frame");
    }
};

// The host side of guest TCP: listeners made once per process (inside the
// private namespace) and the connections one input accepted.
struct HostPeers {
    int listen4 = -1, listen6 = -1;
    std::vector<int> conns;

    static int listen_on(int family) {
        int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) fuzz::fail("listener socket");
        int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_storage ss{};
        socklen_t len;
        if (family == AF_INET6) {
            auto *a = reinterpret_cast<sockaddr_in6 *>(&ss);
            a->sin6_family = AF_INET6;
            a->sin6_addr = in6addr_loopback;
            a->sin6_port = htons(8080);
            len = sizeof *a;
        } else {
            auto *a = reinterpret_cast<sockaddr_in *>(&ss);
            a->sin_family = AF_INET;
            a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            a->sin_port = htons(8080);
            len = sizeof *a;
        }
        if (::bind(fd, reinterpret_cast<sockaddr *>(&ss), len) < 0 ||
            ::listen(fd, 64) < 0)
            fuzz::fail("listener bind/listen");
        return fd;
    }
    void open() {
        listen4 = listen_on(AF_INET);
        listen6 = listen_on(AF_INET6);
    }
    // Accepts what is pending, echoes what arrived, closes on EOF.
    void serve() {
        for (int l : {listen4, listen6})
            for (int c; conns.size() < 32 &&
                        (c = ::accept4(l, nullptr, nullptr,
                                       SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;)
                conns.push_back(c);
        uint8_t buf[16384];
        for (int &c : conns) {
            if (c < 0) continue;
            ssize_t n = ::recv(c, buf, sizeof buf, 0);
            if (n > 0) (void)::send(c, buf, size_t(n), MSG_NOSIGNAL);
            if (n == 0) {
                ::close(c);
                c = -1;
            }
        }
    }
    void close_all() {
        for (int c : conns)
            if (c >= 0) ::close(c);
        conns.clear();
    }
};

HostPeers peers;

// Next sequence libslirp sends per connection, for the ack fix-up (a few
// connections per input; the oldest is forgotten first).
struct SentSeqs {
    struct Entry {
        uint8_t guest[16], remote[16];
        uint16_t gport, rport;
        uint32_t next;
    };
    std::vector<Entry> entries;

    void note(std::span<const uint8_t> frame) {
        tcp::Segment s;
        if (tcp::parse_segment(frame, s) != tcp::Parse::Ok) return;
        uint32_t next = s.seq + uint32_t(s.payload.size()) +
                        ((s.flags & (tcp::kSyn | tcp::kFin)) ? 1 : 0);
        for (auto &e : entries)
            if (!std::memcmp(e.guest, s.dst, 16) && !std::memcmp(e.remote, s.src, 16) &&
                e.gport == s.dport && e.rport == s.sport) {
                e.next = next;
                return;
            }
        if (entries.size() == 8) entries.erase(entries.begin());
        Entry e{};
        std::memcpy(e.guest, s.dst, 16);
        std::memcpy(e.remote, s.src, 16);
        e.gport = s.dport, e.rport = s.sport, e.next = next;
        entries.push_back(e);
    }
    // Rewrites the ack of a guest segment of a known connection.
    void fix_ack(std::span<uint8_t> frame) const {
        tcp::Segment s;
        if (tcp::parse_segment(frame, s) != tcp::Parse::Ok) return;
        for (const auto &e : entries)
            if (!std::memcmp(e.guest, s.src, 16) && !std::memcmp(e.remote, s.dst, 16) &&
                e.gport == s.sport && e.rport == s.dport) {
                uint8_t *th = frame.data() + 14 +
                              (s.v6 ? 40 : size_t(frame[14] & 0x0f) * 4);
                size_t seg_len = size_t(th[12] >> 4) * 4 + s.payload.size();
                th[8] = uint8_t(e.next >> 24), th[9] = uint8_t(e.next >> 16);
                th[10] = uint8_t(e.next >> 8), th[11] = uint8_t(e.next);
                th[16] = th[17] = 0;
                const uint8_t *ip = frame.data() + 14;
                uint8_t tail[4] = {0, 6, uint8_t(seg_len >> 8), uint8_t(seg_len)};
                uint64_t sum = s.v6 ? csum_add(0, ip + 8, 32) : csum_add(0, ip + 12, 8);
                sum = csum_add(csum_add(sum, tail, 4), th, seg_len);
                put_be16(th + 16, uint16_t(~csum_fold(sum)));
                return;
            }
    }
};

struct Stack {
    Timers timers;
    int64_t now_ns = 1'000'000'000;
    std::vector<pollfd> fds;
    OutputCheck to_guest;
    Stats stats;
    Coalescer coalescer{to_guest, stats};
    bool vnet = false;
    Ipv4Reassembler reassembler;
    ReassWrapGuard wrap_guard;
    SentSeqs sent;
    SlirpQueueDrain drain; // before slirp_cleanup, as SlirpAdapter does
    Slirp *slirp = nullptr;

    static Stack &self(void *o) { return *static_cast<Stack *>(o); }
    static ssize_t send_packet(const void *buf, size_t len, void *o) {
        auto &s = self(o);
        if (s.drain.discard_frame()) return ssize_t(len);
        std::span<const uint8_t> f(static_cast<const uint8_t *>(buf), len);
        s.wrap_guard.from_slirp(f);
        s.sent.note(f);
        if (s.vnet) s.coalescer.push(f);
        return ssize_t(len);
    }
    static void guest_error(const char *, void *) {}
    static int64_t clock_get_ns(void *o) {
        return self(o).now_ns + self(o).drain.clock_offset_ns();
    }
    static void *timer_new(SlirpTimerCb cb, void *cb_opaque, void *o) {
        return self(o).timers.create(cb, cb_opaque);
    }
    static void timer_free(void *t, void *o) { self(o).timers.destroy(t); }
    static void timer_mod(void *t, int64_t ms, void *o) { self(o).timers.arm(t, ms); }
    static void nop_fd(int, void *) {}
    static void notify(void *) {}
    static int add_poll(int fd, int ev, void *o) {
        short e = 0;
        if (ev & SLIRP_POLL_IN) e |= POLLIN;
        if (ev & SLIRP_POLL_OUT) e |= POLLOUT;
        if (ev & SLIRP_POLL_PRI) e |= POLLPRI;
        self(o).fds.push_back(pollfd{fd, e, 0});
        return int(self(o).fds.size() - 1);
    }
    static int get_revents(int idx, void *o) {
        auto &fds = self(o).fds;
        if (idx < 0 || size_t(idx) >= fds.size()) return 0;
        short r = fds[size_t(idx)].revents;
        return ((r & POLLIN) ? SLIRP_POLL_IN : 0) |
               ((r & POLLOUT) ? SLIRP_POLL_OUT : 0) |
               ((r & POLLPRI) ? SLIRP_POLL_PRI : 0) |
               ((r & (POLLERR | POLLNVAL)) ? SLIRP_POLL_ERR : 0) |
               ((r & POLLHUP) ? SLIRP_POLL_HUP : 0);
    }

    explicit Stack(uint8_t cfg) : vnet(cfg & 1) {
        static const SlirpCb cb = {
            .send_packet = send_packet, .guest_error = guest_error,
            .clock_get_ns = clock_get_ns, .timer_new = timer_new,
            .timer_free = timer_free, .timer_mod = timer_mod,
            .register_poll_fd = nop_fd, .unregister_poll_fd = nop_fd,
            .notify = notify, .init_completed = nullptr,
            .timer_new_opaque = nullptr,
        };
        // The defaults of config.hpp / stack_loop.cpp: 10.0.2.0/24, fd00::/64.
        SlirpConfig sc{};
        sc.version = 4;
        sc.in_enabled = true;
        inet_pton(AF_INET, "10.0.2.0", &sc.vnetwork);
        inet_pton(AF_INET, "255.255.255.0", &sc.vnetmask);
        inet_pton(AF_INET, "10.0.2.2", &sc.vhost);
        inet_pton(AF_INET, "10.0.2.15", &sc.vdhcp_start);
        inet_pton(AF_INET, "10.0.2.3", &sc.vnameserver);
        sc.in6_enabled = (cfg & 2) != 0;
        inet_pton(AF_INET6, "fd00::", &sc.vprefix_addr6);
        sc.vprefix_len = 64;
        inet_pton(AF_INET6, "fd00::2", &sc.vhost6);
        inet_pton(AF_INET6, "fd00::3", &sc.vnameserver6);
        sc.if_mtu = sc.if_mru = (cfg & 8) ? 1500 : 65520;
        sc.disable_dns = (cfg & 4) != 0;
        sc.disable_host_loopback = (cfg & 16) != 0;
        slirp = slirp_new(&sc, &cb, this);
        if (slirp == nullptr) fuzz::fail("slirp_new refused the config");
    }
    ~Stack() {
        drain.run(slirp);
        slirp_cleanup(slirp);
        peers.close_all();
    }

    void poll_sockets() {
        fds.clear();
        uint32_t timeout = 0;
        slirp_pollfds_fill(slirp, &timeout, add_poll, this);
        int n = ::poll(fds.data(), fds.size(), 0);
        slirp_pollfds_poll(slirp, n < 0, get_revents, this);
        peers.serve();
    }

    // StackLoop::input_frame on a frame of exactly the read size.
    void input(std::vector<uint8_t> &buf, bool fix_ack) {
        std::span<uint8_t> frame = prepare_guest_frame(buf, vnet);
        static const Ipv4Cidr net = Ipv4Cidr::parse("cidr", "10.0.2.0/24");
        static const in6_addr prefix6 = parse_ipv6("prefix", "fd00::");
        if (frame.empty() || !libslirp_ethertype(frame) ||
            !guest_source_allowed(frame, net, prefix6) ||
            router_message_from_guest(frame))
            return;
        if (fix_ack) sent.fix_ack(frame);
        if (is_ipv4_fragment(frame)) {
            frame = reassembler.add(frame, now_ns / 1'000'000).datagram;
            if (frame.empty()) return;
            fuzz::require(!is_ipv4_fragment(frame), "reassembled fragment");
        }
        strip_urgent(frame);
        fuzz::require(!strip_urgent(frame), "URG left for libslirp");
        if (!wrap_guard.allow(frame)) return;
        slirp_input(slirp, frame.data(), int(frame.size()));
    }
};

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    fuzz::isolate_network();
    peers.open();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Input in(data, size);
    OutputCheck probe_out;
    Stats probe_stats;
    Coalescer probe(probe_out, probe_stats);
    uint64_t superseded_bytes = 0;
    {
        Stack stack(in.u8());
        for (size_t r = 0; r < kMaxRecords && in.left() > 0; ++r) {
            uint8_t op = in.u8();
            size_t len = in.u16() + ((op & 0x20) ? 0x10000 : 0);
            auto bytes = in.bytes(std::min(len, kTapFrameMax));
            stack.now_ns += int64_t(op & 0x0f) * 100'000'000;
            // Exact-size copies: any overread is outside the allocation.
            std::vector<uint8_t> frame(bytes.begin(), bytes.end());
            stack.input(frame, (op & 0x40) != 0);
            std::vector<uint8_t> raw(bytes.begin(), bytes.end());
            probe_out.bytes_in += raw.size();
            uint64_t superseded = probe_stats.acks_superseded.load();
            probe.push(raw);
            // A superseded ACK has the size of the one that replaced it.
            if (probe_stats.acks_superseded.load() != superseded)
                superseded_bytes += raw.size();
            stack.timers.run_due(stack.now_ns / 1'000'000);
            if (op & 0x10) stack.poll_sockets();
            stack.coalescer.flush();
        }
        probe.flush();
    }
    // Only pure ACKs superseded by a later one may be left out.
    fuzz::require(probe_out.bytes_in == probe_out.bytes_out + superseded_bytes,
                  "Coalescer lost or invented bytes");
    return 0;
}
