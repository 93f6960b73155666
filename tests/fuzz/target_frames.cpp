// Fuzz target: the frame path from the tap into the stack, as
// StackLoop::input_frame runs it: prepare_guest_frame (strips the
// virtio-net header, completes a partial checksum, drops bogus frames), IPv4
// fragments through Ipv4Reassembler, ARP/IPv4/IPv6 from the guest's own
// addresses only and URG cleared
// (guest_filter.hpp), then slirp_input into a libslirp
// instance configured like stack_loop.cpp's; libslirp's replies go through
// the Coalescer like stack -> guest frames do. Every raw frame is also fed
// to a second Coalescer directly, whose output is checked for consistency.
//
// Input: one config byte, then records {op u8, len u16 LE, bytes}; a record
// may be truncated by the end of the input. op bits 0-3: advance the clock
// by n * 100 ms first; bit 4: poll host sockets afterwards; bit 5: add
// 64 KiB to len (oversized frames are cut like read() into the tap buffer
// would cut them).
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
#include "datapath/reassembly.hpp"
#include "parent/timers.hpp"

using namespace rknp;

namespace {

constexpr size_t kFrameBuffer = 65536 + 1024; // stack_loop.cpp's tap buffer
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

struct Stack {
    Timers timers;
    int64_t now_ns = 1'000'000'000;
    std::vector<pollfd> fds;
    OutputCheck to_guest;
    Stats stats;
    Coalescer coalescer{to_guest, stats};
    bool vnet = false;
    Ipv4Reassembler reassembler;
    Slirp *slirp = nullptr;

    static Stack &self(void *o) { return *static_cast<Stack *>(o); }
    static ssize_t send_packet(const void *buf, size_t len, void *o) {
        auto &s = self(o);
        std::span<const uint8_t> f(static_cast<const uint8_t *>(buf), len);
        if (s.vnet) s.coalescer.push(f);
        return ssize_t(len);
    }
    static void guest_error(const char *, void *) {}
    static int64_t clock_get_ns(void *o) { return self(o).now_ns; }
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
    ~Stack() { slirp_cleanup(slirp); }

    void poll_sockets() {
        fds.clear();
        uint32_t timeout = 0;
        slirp_pollfds_fill(slirp, &timeout, add_poll, this);
        int n = ::poll(fds.data(), fds.size(), 0);
        slirp_pollfds_poll(slirp, n < 0, get_revents, this);
    }

    // StackLoop::input_frame on a frame of exactly the read size.
    void input(std::vector<uint8_t> &buf) {
        std::span<uint8_t> frame = prepare_guest_frame(buf, vnet);
        static const Ipv4Cidr net = Ipv4Cidr::parse("cidr", "10.0.2.0/24");
        static const in6_addr prefix6 = parse_ipv6("prefix", "fd00::");
        if (frame.empty() || !libslirp_ethertype(frame) ||
            !guest_source_allowed(frame, net, prefix6))
            return;
        if (is_ipv4_fragment(frame)) {
            frame = reassembler.add(frame, now_ns / 1'000'000).datagram;
            if (frame.empty()) return;
            fuzz::require(!is_ipv4_fragment(frame), "reassembled fragment");
        }
        strip_urgent(frame);
        fuzz::require(!strip_urgent(frame), "URG left for libslirp");
        slirp_input(slirp, frame.data(), int(frame.size()));
    }
};

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    fuzz::isolate_network();
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
            auto bytes = in.bytes(std::min(len, kFrameBuffer));
            stack.now_ns += int64_t(op & 0x0f) * 100'000'000;
            // Exact-size copies: any overread is outside the allocation.
            std::vector<uint8_t> frame(bytes.begin(), bytes.end());
            stack.input(frame);
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
