// SPDX-License-Identifier: Apache-2.0

// Fuzz target: the frame path from the tap into the stack, through the
// same GuestIngress the stack loop runs (parent/guest_ingress.hpp): the
// virtio-net header split off, the guest filter, IPv4 reassembly, the TCP
// and UDP fast paths (on a tap with vnet headers, config bits 5 and 7),
// checksum completion, URG cleared, then libslirp as the last path:
// SlirpFlowGate's admission (FlowLimits) and the 4.7.0 reassembly-loop
// guard (ReassWrapGuard), as SlirpAdapter::guest_frame does. libslirp's replies go through the Coalescer like stack -> guest
// frames do; the fast paths' frames, like libslirp's, are checked by
// OutputCheck (lengths, partial checksums), the UDP fast path's also by
// udp_check.hpp's GuestCheck (MTU, fragments, ICMP errors, checksums).
// Every raw frame is also fed to
// a second Coalescer directly, whose output is checked for byte
// conservation. Guest TCP reaches real connections: the private namespace
// has listeners on 127.0.0.1:8080 and [::1]:8080 (the gateway's port 8080)
// that accept, echo what they read and close on a guest FIN, so
// reassembly, urgent data, window and teardown paths run in libslirp and
// the fast path alike; UDP sockets on the same addresses echo every
// datagram (host sockets are served when a record polls).
//
// What stays out, and why: SlirpAdapter and TapIo (this target owns its
// libslirp instance to drive a simulated clock and to see libslirp's
// sequence numbers; the instance is configured like SlirpAdapter's by
// hand, the fast paths like stack_loop.cpp's make_fast_path and
// make_udp_fast_path), the tap
// itself (frames arrive as records), the stack loop's poll (host sockets
// are polled when a record asks) and forwards.
//
// Input: one config byte, then records {op u8, len u16 LE, bytes}; a record
// may be truncated by the end of the input. Config bits: 0 vnet headers,
// 1 IPv6, 2 no DNS, 3 MTU 1500 (else 65520), 4 no host loopback, 5 the
// TCP fast path (with vnet headers only, as in the stack loop), 6 tight
// flow limits (max_flows 4, 2 new flows a second; else the defaults), 7 the
// ICMP echo path (ping sockets are allowed in the private namespace; its
// replies to the gateway come from that namespace's loopback). Bit 5 also
// turns on the UDP fast path (vnet headers only, as in the stack loop; it
// is flushed after every record, as the loop flushes it after a batch of
// tap reads).
// op bits 0-3: advance the clock by n * 100 ms first; bit 4: poll host
// sockets afterwards; bit 5: add 64 KiB to len (oversized frames are cut
// like read() into the tap buffer would cut them); bit 6: a TCP segment's
// acknowledgement number is replaced by the next sequence the stack will
// send on that connection (its checksum redone, left partial when the vnet
// header asks for that), as a guest that read the SYN-ACK would: neither
// libslirp nor the fast path is instrumented, so the fuzzer could not learn
// their ISNs otherwise.
#include <arpa/inet.h>
#include <poll.h>
#include <slirp/libslirp.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "common/config.hpp"
#include "datapath/coalescer.hpp"
#include "datapath/guest_filter.hpp"
#include "datapath/offload.hpp"
#include "datapath/icmp/fastpath.hpp"
#include "datapath/reassembly.hpp"
#include "datapath/tcp/fastpath.hpp"
#include "datapath/udp/fastpath.hpp"
#include "../lib/tcp_peek_env.hpp"
#include "frames_rig.hpp"
#include "fuzz_input.hpp"
#include "net_isolation.hpp"
#include "parent/flow_limits.hpp"
#include "parent/guest_ingress.hpp"
#include "slirp/flow_gate.hpp"
#include "slirp/queue_drain.hpp"
#include "slirp/reass_wrap_guard.hpp"
#include "slirp/timers.hpp"
#include "udp_check.hpp"

using namespace rknp;
using namespace fuzz::frames;

namespace {

constexpr size_t kMaxRecords = 64;

HostPeers peers;

// The fast path as stack_loop.cpp's fast_path_config sets it up for the
// addresses Stack gives libslirp, on the simulated clock, with a fixed ISN
// just short of the sequence wrap (reproducible inputs) and a small batch
// (its full-batch paths run too).
tcp::FastPathConfig fast_path_config(uint8_t cfg, const FlowLimits &limits,
                                     const int64_t &now_ns) {
    tcp::FastPathConfig f;
    f.max_flows = limits.max_flows();
    f.ipv6 = (cfg & 2) != 0;
    f.prefix6 = parse_ipv6("prefix", kIpv6Prefix);
    f.gateway6 = parse_ipv6("gateway", kIpv6Gateway);
    f.dns6 = parse_ipv6("dns", kIpv6Dns);
    f.disable_host_loopback = (cfg & 16) != 0;
    f.mtu = (cfg & 8) ? 1500 : 65520;
    f.batch_data_frames = 8;
    f.batch_control_frames = 8;
    f.clock = [&now_ns] { return now_ns / 1'000'000; };
    f.fixed_isn = uint32_t(-20000);
    return f;
}

// The UDP fast path's guest-bound frames: checked as UDP fast path frames,
// then by OutputCheck like every frame to the guest.
struct UdpOut final : GuestSink {
    fuzz::udpcheck::GuestCheck check;
    GuestSink *next = nullptr;
    void write_frame(const VnetHdr &h, std::span<const uint8_t> head,
                     std::span<const uint8_t> rest) override {
        check.write_frame(h, head, rest);
        next->write_frame(h, head, rest);
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
    ReassWrapGuard wrap_guard;
    SentSeqs sent;
    FlowLimits limits;
    std::unique_ptr<tcp::FastPath> fast;
    UdpOut udp_out;
    std::unique_ptr<udp::FastPath> udp_fast;
    std::unique_ptr<icmp::FastPath> echo;
    // libslirp as the catch-all path, as SlirpAdapter is: its gate, then
    // to_libslirp.
    struct SlirpPath final : Path {
        Stack &s;
        SlirpFlowGate gate;
        SlirpPath(Stack &st, uint32_t max_flows)
            : s(st), gate(Ipv4Cidr::parse("cidr", "10.0.2.0/24"), max_flows,
                          [&st](bool l) { return st.ingress.admit_flow(st.now_ms(), l); }) {}
        const char *name() const override { return "libslirp"; }
        Traits traits() const override { return {.needs_checksum = true}; }
        Verdict guest_frame(std::span<const uint8_t> f) override {
            if (!gate.begin(f)) return Verdict::Refused;
            s.to_libslirp(f);
            gate.end();
            return Verdict::Consumed;
        }
        int64_t ms_until_next_timer(int64_t) const override { return -1; }
        void run_timers(int64_t) override {}
        void tap_detached() override {}
        size_t flows() const override { return gate.flows(); }
        size_t lingering_flows() const override { return gate.lingering_flows(); }
    } slirp_path;
    GuestIngress ingress;
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
    static void register_fd(int fd, void *o) { self(o).slirp_path.gate.sockets().on_register(fd); }
    static void unregister_fd(int fd, void *o) {
        self(o).slirp_path.gate.sockets().on_unregister(fd);
    }
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

    explicit Stack(uint8_t cfg)
        : vnet(cfg & 1),
          limits((cfg & 64) ? 4 : kDefaultMaxFlows,
                 (cfg & 64) ? 2 : kDefaultMaxNewFlowsPerSec, stats,
                 uint64_t(now_ns / 1'000'000)),
          fast(make_fast_path(cfg)), udp_fast(make_udp_fast_path(cfg)),
          echo(make_echo_path(cfg)), slirp_path(*this, limits.max_flows()),
          ingress(Ipv4Cidr::parse("cidr", "10.0.2.0/24"), stats, limits,
                  {fast.get(), udp_fast.get(), echo.get(), &slirp_path}) {
        static const SlirpCb cb = {
            .send_packet = send_packet, .guest_error = guest_error,
            .clock_get_ns = clock_get_ns, .timer_new = timer_new,
            .timer_free = timer_free, .timer_mod = timer_mod,
            .register_poll_fd = register_fd, .unregister_poll_fd = unregister_fd,
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
        if (udp_fast && std::getenv("RKNP_FUZZ_TRACE") != nullptr) {
            const udp::FastPathStats &st = udp_fast->stats();
            std::fprintf(stderr,
                         "udp fast path: opened %llu refused %llu to_host %llu to_guest %llu "
                         "fragmented %llu icmp %llu\n",
                         (unsigned long long)st.flows_opened, (unsigned long long)st.flows_refused,
                         (unsigned long long)st.datagrams_to_host,
                         (unsigned long long)st.datagrams_to_guest,
                         (unsigned long long)st.fragmented, (unsigned long long)st.icmp_to_guest);
        }
        drain.run(slirp);
        slirp_cleanup(slirp);
        peers.close_all();
    }

    int64_t now_ms() const { return now_ns / 1'000'000; }

    // With config bit 5 on a tap with vnet headers, as the stack loop has
    // it (peek mode: RKNP_TEST_TCP_PEEK_MODE, else automatic).
    std::unique_ptr<tcp::FastPath> make_fast_path(uint8_t cfg) {
        if (!vnet || !(cfg & 32)) return nullptr;
        tcp::FastPathConfig fc = fast_path_config(cfg, limits, now_ns);
        fc.admit_flow = [this] { return ingress.admit_flow(now_ms(), false); };
        tcpsim::apply_test_peek_mode(fc);
        return std::make_unique<tcp::FastPath>(std::move(fc));
    }

    // With config bit 7, as stack_loop.cpp's make_echo_path has it (off
    // when the probe finds ping sockets refused).
    std::unique_ptr<icmp::FastPath> make_echo_path(uint8_t cfg) {
        if (!(cfg & 128)) return nullptr;
        const tcp::FastPathConfig fc = fast_path_config(cfg, limits, now_ns);
        icmp::EchoConfig ec = icmp::echo_config_from(fc, fc.mtu);
        ec.max_entries = 8;
        ec.clock = [this] { return now_ms(); };
        ec.admit_entry = [this] { return ingress.admit_flow(now_ms(), true) == Admission::Accept; };
        auto e = std::make_unique<icmp::FastPath>(std::move(ec), to_guest);
        if (!e->enabled()) return nullptr;
        return e;
    }

    // With config bit 5 on a tap with vnet headers, configured as
    // stack_loop.cpp's make_udp_fast_path does (the same virtual network
    // as the TCP fast path's), writing to udp_out.
    std::unique_ptr<udp::FastPath> make_udp_fast_path(uint8_t cfg) {
        if (!vnet || !(cfg & 32)) return nullptr;
        const tcp::FastPathConfig t = fast_path_config(cfg, limits, now_ns);
        udp::FastPathConfig uc;
        static_cast<VirtualNet &>(uc) = static_cast<const VirtualNet &>(t);
        uc.max_flows = limits.max_flows();
        uc.mtu = t.mtu;
        uc.clock = t.clock;
        uc.admit_flow = [this] { return ingress.admit_flow(now_ms(), true); };
        udp_out.check.mtu = uc.mtu;
        udp_out.next = &to_guest;
        return std::make_unique<udp::FastPath>(std::move(uc), udp_out);
    }

    // SlirpAdapter::input's guard, then libslirp; what GuestIngress hands
    // over must be whole and without urgent data.
    void to_libslirp(std::span<const uint8_t> frame) {
        fuzz::require(!is_ip_fragment(frame), "fragment for libslirp");
        std::vector<uint8_t> copy(frame.begin(), frame.end());
        fuzz::require(!strip_urgent(copy), "URG left for libslirp");
        if (!wrap_guard.allow(frame)) return;
        slirp_input(slirp, frame.data(), int(frame.size()));
    }

    // The fast path's output batch, as the stack loop writes it to the tap.
    void flush_fast_path() {
        if (!fast) return;
        tcp::GuestFrames &out = fast->frames();
        for (size_t i = 0; i < out.size(); ++i) {
            std::vector<uint8_t> f(out.headers(i).begin(), out.headers(i).end());
            f.insert(f.end(), out.payload(i).begin(), out.payload(i).end());
            sent.note(f);
            to_guest.write_frame(out.vnet(i), out.headers(i), out.payload(i));
        }
        out.clear();
    }

    void poll_sockets() {
        fds.clear();
        uint32_t timeout = 0;
        slirp_pollfds_fill(slirp, &timeout, add_poll, this);
        int n = ::poll(fds.data(), fds.size(), 0);
        slirp_pollfds_poll(slirp, n < 0, get_revents, this);
        if (fast) {
            fast->poll_events();
            flush_fast_path();
        }
        if (echo) echo->poll_events();
        if (udp_fast) {
            udp_fast->poll_events();
            udp_out.check.require_idle();
        }
        peers.serve();
    }

    void run_timers() {
        timers.run_due(now_ms());
        if (echo) echo->run_timers(now_ms());
        if (udp_fast) udp_fast->run_timers(now_ms());
        if (!fast) return;
        fast->run_timers(now_ms());
        flush_fast_path();
    }

    // A frame of exactly the read size, as the stack loop's drain_tap
    // hands it over.
    void input(std::vector<uint8_t> &buf, bool fix_ack) {
        if (fix_ack) sent.fix_ack(buf, vnet);
        if (ingress.input(buf, vnet, now_ms()) == GuestIngress::Outcome::Path)
            flush_fast_path();
        if (udp_fast) {
            udp_fast->flush();
            udp_out.check.require_idle();
            fuzz::require(udp_fast->flows() <= limits.max_flows(), "more UDP flows than max_flows");
        }
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
            stack.run_timers();
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
