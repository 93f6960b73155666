// SPDX-License-Identifier: Apache-2.0

// Fuzz target: the TCP fast path (plugin/datapath/tcp/fastpath.hpp) driven
// by arbitrary guest segment sequences against real loopback listeners in
// the target's private network namespace (net_isolation.hpp). One FastPath
// per input, with a test clock; the input is a script of guest segments,
// host-peer actions, clock jumps with run_timers() and poll_events().
//
// Every byte of every stream, both directions, is stream_byte(offset from
// the stream's start): a guest segment at sequence s carries the bytes of
// offset s - (irs + 1) of its flow, and host peers write the same function
// from offset 0. The bytes mean nothing to the fast path, and fixing them
// by position is what lets the target check delivery exactly without
// knowing which host connection belongs to which flow.
//
// Properties, checked after every call into the FastPath (fuzz::require):
// - every guest-bound frame parses, belongs to one of the guest's tuples,
//   has IP lengths that match the frame, a vnet header that makes its
//   checksum partial at the TCP checksum (completing it gives valid TCP and
//   IPv4 header sums), GSO only for payloads longer than gso_size, which is
//   the MSS negotiated from the guest's SYN (frames without GSO carry at
//   most that much);
// - a SYN-ACK acks exactly the flow's SYN; other non-RST frames come after
//   it, carry the host's stream at their sequence offset, never beyond what
//   the host peers wrote, and ack at most what the fast path handed to the
//   host for this flow (+1 for a FIN);
// - the host peers read exactly stream_byte(0, 1, ...) on every connection
//   (no invented, skipped or reordered bytes) and in all at most the fast
//   path's bytes_to_host;
// - flows() <= max_flows and = flows_opened - flows_closed; no deadline is
//   left due after run_timers();
// - after the FastPath is destroyed and the host connections are closed,
//   /proc/self/fd holds exactly the descriptors it held before the input.
//
// Input: a config byte c (max_flows = 1 + (c & 7); 0x08 smallest output
// batch; 0x10 random ISN instead of the fixed one; 0x20
// disable_host_loopback; 0x40 MTU 1500 instead of 65520; 0x80 IPv6 off),
// a peek-mode byte (bit 0: PeekMode::Discard, else Automatic, which is
// Offset on Linux >= 6.9), u32 fixed ISN, u32 guest ISN base; then up to kMaxRecords records, each
// an op byte whose low two bits say what follows (all integers LE, reads
// past the end give zeros):
//   0 guest segment: op bits 2-4 tuple (kTuples), 0x20 options, 0x40
//     mangle, 0x80 payload; u8 TCP flags; u8 modes (bits 0-1 seq base:
//     what the fast path acked last / irs + 1 / absolute / the guest's
//     highest sent; bits 2-3 ack base: in-order received / highest sent to
//     the guest / absolute / iss + 1; 0x10 window given, else 65535);
//     seq (i16 delta, or u32 if absolute); ack (same); [u16 window];
//     [options: u8 bits (1 MSS u16, 2 WS u8, 4 SACK-permitted,
//     bits 4-6 count of raw option bytes that follow)]; [u16 payload
//     length]; [mangle: u8 field, u8 value: a header byte other than
//     addresses, ports, sequence number, IHL and data offset (an IP
//     length may cut the payload or make the frame malformed), or the
//     frame truncated / padded];
//   1 host action on accepted connection op >> 2 (mod their number): u8
//     action (read / write / echo what was read / shutdown(SHUT_WR) /
//     close / close with RST), u16 amount - 1;
//   2 clock: u16 ms (x64 if op & 4), then run_timers() unless op & 8;
//   3 poll_events().
// Host side: 127.0.0.1 and ::1 ports 8080 and 8081 accept every
// connection (8081 with a small receive buffer, so windows fill when its
// peers stop reading); 8082 is closed (connection refused). TCP send
// buffers in the namespace are capped at 128 KiB (tcp_wmem). The host side
// is tcp_host.hpp; here: the guest, the script's records and the checks.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "../lib/tcp_guest_frames.hpp"
#include "datapath/tcp/fastpath.hpp"
#include "datapath/tcp/seq.hpp"
#include "fuzz_input.hpp"
#include "net_isolation.hpp"
#include "tcp_host.hpp"

using namespace rknp;
using namespace rknp::tcp;
using tcpsim::Bytes;
using namespace fuzz::tcp_host;

namespace {

constexpr size_t kMaxRecords = 256;

// What the guest knows about the current flow of one tuple.
struct GuestTuple {
    const TupleDef *def = nullptr;
    uint8_t src[16]{}, dst[16]{};
    uint32_t irs = 0;       // sequence number of the SYN that opened the flow
    uint32_t guest_nxt = 0; // highest sequence the guest sent data up to
    uint16_t mss = 0;       // of the fast path's segments, from our SYN
    bool synack = false;    // the flow's SYN-ACK arrived
    uint32_t iss = 0;
    uint32_t rcv_nxt = 0;   // in-order data received from the fast path
    uint32_t peer_ack = 0;  // highest ACK from the fast path
    uint32_t peer_max = 0;  // highest sequence it sent up to
    uint64_t accepted = 0;  // bytes the fast path gave the host for this flow

    void opened(uint32_t syn_seq, uint16_t mss_now) {
        irs = syn_seq;
        guest_nxt = peer_ack = syn_seq + 1;
        mss = mss_now;
        synack = false;
        accepted = 0;
    }
};

class Harness {
public:
    explicit Harness(fuzz::Input &in) : in_(in) {
        const uint8_t c = in.u8();
        cfg_.peek_mode = (in.u8() & 1) ? PeekMode::Discard : PeekMode::Automatic;
        const uint32_t isn = in.u32(), guest_isn = in.u32();
        cfg_.ipv6 = (c & 0x80) == 0;
        inet_pton(AF_INET6, "fd00::", &cfg_.prefix6);
        inet_pton(AF_INET6, "fd00::2", &cfg_.gateway6);
        inet_pton(AF_INET6, "fd00::3", &cfg_.dns6);
        cfg_.max_flows = 1 + (c & 7);
        cfg_.batch_data_frames = (c & 0x08) ? 1 : 4;
        cfg_.batch_control_frames = (c & 0x08) ? 4 : 8;
        if ((c & 0x10) == 0) cfg_.fixed_isn = isn;
        cfg_.disable_host_loopback = (c & 0x20) != 0;
        cfg_.mtu = (c & 0x40) ? 1500 : 65520;
        cfg_.clock = [this] { return now_; };
        fp_ = std::make_unique<FastPath>(cfg_);
        for (size_t t = 0; t < std::size(kTuples); ++t) {
            GuestTuple &g = tuples_[t];
            g.def = &kTuples[t];
            if (g.def->v6) {
                inet_pton(AF_INET6, "fd00::100", g.src);
                inet_pton(AF_INET6, g.def->dst, g.dst);
            } else {
                uint8_t a[4] = {10, 0, 2, 100}, b[4];
                inet_pton(AF_INET, g.def->dst, b);
                map_v4(a, g.src);
                map_v4(b, g.dst);
            }
            g.opened(guest_isn + uint32_t(t) * 0x10000000u, 0);
            g.rcv_nxt = isn + 1;
        }
    }

    void run() {
        for (size_t r = 0; r < kMaxRecords && in_.left() > 0; ++r) {
            const uint8_t op = in_.u8();
            switch (op & 3) {
            case 0:
                guest_segment(op);
                break;
            case 1: {
                uint8_t action = in_.u8();
                uint32_t amount = uint32_t(in_.u16()) + 1;
                if (trace_) std::fprintf(stderr, "host %u action %u amount %u\n",
                                         op >> 2, action % 6, amount);
                host_.act(op >> 2, action, amount);
                break;
            }
            case 2: {
                int64_t ms = in_.u16();
                now_ += (op & 4) ? ms * 64 : ms;
                if (trace_) std::fprintf(stderr, "clock +%lld\n", (long long)((op & 4) ? ms * 64 : ms));
                if (op & 8) break;
                fp_->run_timers(now_);
                check_frames();
                fuzz::require(fp_->ms_until_next_timer(now_) != 0,
                              "a deadline is still due after run_timers");
                break;
            }
            case 3:
                if (trace_) std::fprintf(stderr, "poll\n");
                fp_->poll_events();
                check_frames();
                break;
            }
            host_.accept_all();
            check_invariants();
        }
    }

    // Destroys the FastPath (closing its sockets), then the host side.
    void finish() {
        if (trace_) {
            const FastPathStats &st = fp_->stats();
            std::fprintf(stderr,
                         "stats opened %llu closed %llu refused %llu connect_failed %llu "
                         "rst_from_guest %llu rst_to_guest %llu retransmits %llu "
                         "fast_retransmits %llu timeouts %llu dropped %llu malformed %llu "
                         "partial %llu lost %llu to_host %llu to_guest %llu\n",
                         (unsigned long long)st.flows_opened, (unsigned long long)st.flows_closed,
                         (unsigned long long)st.flows_refused,
                         (unsigned long long)st.connect_failed,
                         (unsigned long long)st.resets_from_guest,
                         (unsigned long long)st.resets_to_guest,
                         (unsigned long long)st.retransmits,
                         (unsigned long long)st.fast_retransmits,
                         (unsigned long long)st.timeouts,
                         (unsigned long long)st.segments_dropped,
                         (unsigned long long)st.malformed, (unsigned long long)st.partial_sends,
                         (unsigned long long)st.frames_lost,
                         (unsigned long long)st.bytes_to_host,
                         (unsigned long long)st.bytes_to_guest);
        }
        fp_.reset();
        host_.close_all();
    }

private:
    uint16_t our_mss(bool v6) const {
        uint32_t hdrs = (v6 ? kIp6Len : kIp4Len) + kTcpLen;
        return uint16_t(std::min<size_t>(cfg_.mtu - hdrs, kMaxPayload));
    }

    uint32_t pick(uint32_t base) { return base + uint32_t(int16_t(in_.u16())); }

    Bytes options() {
        const uint8_t bits = in_.u8();
        Bytes o;
        if (bits & 1) {
            uint16_t m = in_.u16();
            o.insert(o.end(), {2, 4, uint8_t(m >> 8), uint8_t(m)});
        }
        if (bits & 2) o.insert(o.end(), {1, 3, 3, in_.u8()});
        if (bits & 4) o.insert(o.end(), {4, 2});
        auto raw = in_.bytes((bits >> 4) & 7);
        o.insert(o.end(), raw.begin(), raw.end());
        while (o.size() % 4 != 0) o.push_back(0);
        return o;
    }

    // Changes one header byte that does not move or relabel the payload
    // (addresses, ports, the sequence number and header lengths stay), or
    // cuts or pads the frame.
    void mangle(Bytes &f, bool v6) {
        static const uint8_t ip4[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
        static const uint8_t ip6[] = {1, 2, 3, 4, 5, 6, 7};
        static const uint8_t tcp[] = {8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
        const size_t nip = v6 ? std::size(ip6) : std::size(ip4);
        const size_t nfields = nip + std::size(tcp);
        const uint8_t which = in_.u8(), value = in_.u8();
        const size_t ip = kEthLen, th = ip + (v6 ? kIp6Len : kIp4Len);
        const size_t k = which % (nfields + 2);
        if (k < nip) {
            f[ip + (v6 ? ip6[k] : ip4[k])] = value;
        } else if (k < nfields) {
            size_t at = th + tcp[k - nip];
            // Byte 12: only the reserved bits, not the data offset.
            f[at] = at == th + 12 ? uint8_t((f[at] & 0xf0) | (value & 0x0f)) : value;
        } else if (k == nfields) {
            f.resize(f.size() * value / 256);
        } else {
            f.resize(f.size() + value, 0);
        }
    }

    void guest_segment(uint8_t op) {
        GuestTuple &g = tuples_[(op >> 2) & 7];
        const bool v6 = g.def->v6;
        const uint8_t flags = in_.u8(), modes = in_.u8();
        uint32_t seq, ack;
        switch (modes & 3) {
        case 0: seq = pick(g.peer_ack); break;
        case 1: seq = pick(g.irs + 1); break;
        case 2: seq = in_.u32(); break;
        default: seq = pick(g.guest_nxt); break;
        }
        switch ((modes >> 2) & 3) {
        case 0: ack = pick(g.rcv_nxt); break;
        case 1: ack = pick(g.peer_max); break;
        case 2: ack = in_.u32(); break;
        default: ack = pick(g.iss + 1); break;
        }
        const uint16_t window = (modes & 0x10) ? in_.u16() : 65535;
        const Bytes opts = (op & 0x20) ? options() : Bytes{};
        size_t len = (op & 0x80) ? in_.u16() : 0;
        // The IP length fields are 16 bits.
        len = std::min(len, 65535 - (v6 ? 0 : kIp4Len) - kTcpLen - opts.size());
        payload_.resize(len);
        fill_stream(payload_.data(), seq - (g.irs + 1), len);
        Bytes f = tcpsim::guest_frame(v6, g.src, g.dst, g.def->sport, g.def->dport, flags,
                                      seq, ack, window, payload_.data(), len, opts);
        if (op & 0x40) mangle(f, v6);

        if (trace_)
            std::fprintf(stderr, "-> t%u flags %02x seq %u ack %u win %u len %zu frame %zu\n",
                         (op >> 2) & 7, flags, seq, ack, window, len, f.size());
        const FastPathStats before = fp_->stats();
        const Verdict v = fp_->guest_frame(f);
        const FastPathStats &after = fp_->stats();
        Segment s;
        const bool parsed = parse_segment(f, s) == Parse::Ok;
        if (after.flows_opened != before.flows_opened) {
            fuzz::require(parsed && (s.flags & kSyn), "a flow opened without a SYN");
            uint16_t want = s.mss != 0 ? s.mss : (v6 ? 1220 : 536);
            g.opened(s.seq, std::min<uint16_t>(std::max<uint16_t>(want, 536), our_mss(v6)));
        } else if (parsed && !s.payload.empty() &&
                   seq_gt(s.seq + uint32_t(s.payload.size()), g.guest_nxt)) {
            g.guest_nxt = s.seq + uint32_t(s.payload.size());
        }
        g.accepted += after.bytes_to_host - before.bytes_to_host;
        const bool libslirps = &g == &tuples_[7] || (v6 && !cfg_.ipv6);
        if (parsed && libslirps) fuzz::require(v == Verdict::NotMine, "took libslirp's flow");
        if (v == Verdict::NotMine)
            fuzz::require(fp_->frames().empty(), "frames for a segment left to libslirp");
        check_frames();
    }

    GuestTuple *tuple_of(const Segment &s) {
        for (GuestTuple &g : tuples_)
            if (g.def->v6 == s.v6 && !std::memcmp(g.src, s.dst, 16) &&
                !std::memcmp(g.dst, s.src, 16) && g.def->sport == s.dport &&
                g.def->dport == s.sport)
                return &g;
        return nullptr;
    }

    void check_frame(const Bytes &f, const VnetHdr &vh, size_t hdr_len) {
        Segment s;
        fuzz::require(parse_segment(f, s) == Parse::Ok, "guest-bound frame does not parse");
        GuestTuple *g = tuple_of(s);
        fuzz::require(g != nullptr, "frame for a 4-tuple the guest never used");
        if (trace_)
            std::fprintf(stderr, "  <- t%zu flags %02x seq %u ack %u win %u len %zu gso %u/%u\n",
                         size_t(g - tuples_), s.flags, s.seq, s.ack, s.window,
                         s.payload.size(), vh.gso_type, vh.gso_size);
        const size_t ip_len = s.v6 ? kIp6Len : kIp4Len;
        const size_t ip_field = s.v6 ? be16(f.data() + kEthLen + 4) + kIp6Len
                                     : be16(f.data() + kEthLen + 2);
        fuzz::require(kEthLen + ip_field == f.size(), "IP length does not match the frame");
        fuzz::require(vh.flags == kVnetNeedsCsum && vh.hdr_len == hdr_len &&
                          vh.csum_start == kEthLen + ip_len && vh.csum_offset == 16,
                      "vnet header offsets");
        fuzz::require(tcpsim::checksums_ok(f, vh), "checksums after completion");
        const size_t payload = s.payload.size();
        if (vh.gso_type != 0) {
            fuzz::require(vh.gso_type == (s.v6 ? kVnetGsoTcp6 : kVnetGsoTcp4), "GSO type");
            fuzz::require(vh.gso_size == g->mss, "gso_size is not the flow's MSS");
            fuzz::require(payload > vh.gso_size && payload <= kMaxPayload,
                          "GSO frame payload size");
        } else {
            fuzz::require(vh.gso_size == 0, "gso_size without GSO");
            fuzz::require(payload <= (g->mss != 0 ? g->mss : 0),
                          "frame without GSO longer than the MSS");
        }
        if (s.flags & kRst) return;
        if (s.flags & kSyn) {
            fuzz::require(s.flags == (kSyn | kAck) && payload == 0, "SYN-ACK flags");
            fuzz::require(s.ack == g->irs + 1, "SYN-ACK does not ack the SYN");
            fuzz::require(s.mss == our_mss(s.v6), "SYN-ACK MSS");
            if (cfg_.fixed_isn) fuzz::require(s.seq == *cfg_.fixed_isn, "ISN not the fixed one");
            g->synack = true;
            g->iss = s.seq;
            g->rcv_nxt = g->peer_max = s.seq + 1;
            return;
        }
        fuzz::require(g->synack, "segment before the SYN-ACK");
        fuzz::require((s.flags & kAck) != 0, "segment without ACK");
        const int32_t rel = seq_diff(s.seq, g->iss + 1);
        fuzz::require(rel >= -1, "sequence before the stream"); // -1: window probe
        // After the data, the host's FIN takes one more sequence number.
        fuzz::require(int64_t(rel) + int64_t(payload) <=
                          int64_t(host_.written_max) + (payload == 0 ? 1 : 0),
                      "sequence beyond what the host wrote");
        if (payload != 0)
            fuzz::require(rel >= 0 && is_stream(s.payload.data(), uint32_t(rel), payload),
                          "guest-bound bytes are not the host's at that sequence");
        const int32_t rel_ack = seq_diff(s.ack, g->irs + 1);
        fuzz::require(rel_ack >= 0 && uint64_t(rel_ack) <= g->accepted + 1,
                      "ACK beyond what the host socket took");
        if (seq_gt(s.ack, g->peer_ack)) g->peer_ack = s.ack;
        const uint32_t end = s.seq + uint32_t(payload) + ((s.flags & kFin) ? 1 : 0);
        if (seq_gt(end, g->peer_max)) g->peer_max = end;
        if (s.seq == g->rcv_nxt) g->rcv_nxt = end;
    }

    void check_frames() {
        GuestFrames &b = fp_->frames();
        fuzz::require(b.size() <= b.capacity(), "batch overflow");
        for (size_t i = 0; i < b.size(); ++i) {
            auto h = b.headers(i);
            auto p = b.payload(i);
            Bytes f(h.begin(), h.end());
            f.insert(f.end(), p.begin(), p.end());
            check_frame(f, b.vnet(i), h.size());
        }
        b.clear();
    }

    void check_invariants() {
        const FastPathStats &st = fp_->stats();
        fuzz::require(fp_->flows() <= cfg_.max_flows, "more flows than max_flows");
        fuzz::require(st.flows_opened - st.flows_closed == fp_->flows(),
                      "flows() does not match opened - closed");
        fuzz::require(host_.read_total <= st.bytes_to_host,
                      "host read more than the fast path sent");
    }

    fuzz::Input &in_;
    // RKNP_FUZZ_TRACE=1: every guest segment and frame to the guest on stderr.
    const bool trace_ = std::getenv("RKNP_FUZZ_TRACE") != nullptr;
    FastPathConfig cfg_;
    int64_t now_ = 1'000'000;
    std::unique_ptr<FastPath> fp_;
    GuestTuple tuples_[std::size(kTuples)];
    Host host_;
    Bytes payload_;
};

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    fuzz::isolate_network();
    small_send_buffers();
    listeners[0] = listen_on(false, 8080, false);
    listeners[1] = listen_on(false, 8081, true);
    listeners[2] = listen_on(true, 8080, false);
    listeners[3] = listen_on(true, 8081, true);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const size_t fds_before = count_fds();
    {
        fuzz::Input in(data, size);
        Harness h(in);
        h.run();
        h.finish();
    }
    fuzz::require(count_fds() == fds_before, "descriptors left after the input");
    return 0;
}
