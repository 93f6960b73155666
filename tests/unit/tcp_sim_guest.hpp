// SPDX-License-Identifier: Apache-2.0

// Test helpers for the TCP fast path: a simulated guest that builds its own
// Ethernet/IP/TCP frames, feeds them to FastPath::guest_frame() and reads
// the GuestFrames batch back, plus real loopback listeners as the host side.
// Loopback only (127.0.0.0/8, ::1), as the project's test rules require.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "datapath/checksum.hpp"
#include "datapath/offload.hpp"
#include "datapath/tcp/fastpath.hpp"
#include "datapath/tcp/frame.hpp"
#include "../lib/tcp_guest_frames.hpp"
#include "../lib/tcp_peek_env.hpp"

namespace tcpsim {

// A frame the fast path produced, copied out of the batch.
struct Rx {
    Bytes frame; // headers + payload
    VnetHdr vnet{};
    Segment seg; // parsed; seg.payload points into frame
    bool csum_ok = false;
    // The payload, at the end of frame (valid in copies too, unlike seg.payload).
    std::span<const uint8_t> data() const {
        return {frame.data() + frame.size() - seg.payload.size(), seg.payload.size()};
    }
    Bytes payload() const { auto d = data(); return Bytes(d.begin(), d.end()); }
};

struct Sim {
    int64_t now = 1'000'000;
    std::unique_ptr<FastPath> fp;
    std::deque<Rx> rx;
    size_t max_batch_seen = 0;

    static FastPathConfig base_config() {
        FastPathConfig c;
        c.ipv6 = true;
        inet_pton(AF_INET6, "fd00::", &c.prefix6);
        inet_pton(AF_INET6, "fd00::2", &c.gateway6);
        inet_pton(AF_INET6, "fd00::3", &c.dns6);
        c.max_flows = 64;
        c.batch_data_frames = 8;
        c.batch_control_frames = 16;
        apply_test_peek_mode(c); // RKNP_TEST_TCP_PEEK_MODE
        return c;
    }
    explicit Sim(FastPathConfig c = base_config()) {
        c.clock = [this] { return now; };
        fp = std::make_unique<FastPath>(std::move(c));
    }
    // Moves the batch into rx, checking every frame on the way.
    void collect() {
        GuestFrames &b = fp->frames();
        max_batch_seen = std::max(max_batch_seen, b.size());
        for (size_t i = 0; i < b.size(); ++i) {
            Rx r;
            auto h = b.headers(i);
            auto p = b.payload(i);
            r.frame.assign(h.begin(), h.end());
            r.frame.insert(r.frame.end(), p.begin(), p.end());
            r.vnet = b.vnet(i);
            r.csum_ok = checksums_ok(r.frame, r.vnet);
            rx.push_back(std::move(r));
            Rx &back = rx.back();
            if (parse_segment(back.frame, back.seg) != Parse::Ok) back.csum_ok = false;
        }
        b.clear();
    }
    void pump(int ms = 2) {
        pollfd p{fp->epoll_fd(), POLLIN, 0};
        if (::poll(&p, 1, ms) > 0) fp->poll_events();
        collect();
    }
    void advance(int64_t ms) {
        now += ms;
        fp->run_timers(now);
        collect();
    }
    // The guest's frames come from an address routed behind it: they
    // reach the fast path as GuestIngress passes them, routed_frame.
    bool routed = false;
    Verdict input(const Bytes &f) {
        Verdict v = routed ? fp->routed_frame(f) : fp->guest_frame(f);
        collect();
        return v;
    }
};

// A listening socket on a loopback address.
struct Listener {
    int fd = -1;
    uint16_t port = 0;
    bool v6 = false;
    explicit Listener(bool ipv6 = false, const char *addr = nullptr) : v6(ipv6) {
        fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_storage ss{};
        socklen_t len;
        if (v6) {
            auto *a = reinterpret_cast<sockaddr_in6 *>(&ss);
            a->sin6_family = AF_INET6;
            inet_pton(AF_INET6, addr ? addr : "::1", &a->sin6_addr);
            len = sizeof *a;
        } else {
            auto *a = reinterpret_cast<sockaddr_in *>(&ss);
            a->sin_family = AF_INET;
            inet_pton(AF_INET, addr ? addr : "127.0.0.1", &a->sin_addr);
            len = sizeof *a;
        }
        ::bind(fd, reinterpret_cast<sockaddr *>(&ss), len);
        ::listen(fd, 1024);
        socklen_t l = sizeof ss;
        ::getsockname(fd, reinterpret_cast<sockaddr *>(&ss), &l);
        port = ntohs(v6 ? reinterpret_cast<sockaddr_in6 *>(&ss)->sin6_port
                        : reinterpret_cast<sockaddr_in *>(&ss)->sin_port);
    }
    ~Listener() { if (fd >= 0) ::close(fd); }
    // Non-blocking accept; -1 if none yet.
    int try_accept(sockaddr_storage *peer = nullptr) const {
        sockaddr_storage ss{};
        socklen_t l = sizeof ss;
        int c = ::accept4(fd, reinterpret_cast<sockaddr *>(&ss), &l,
                          SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c >= 0 && peer) *peer = ss;
        return c;
    }
};

// One guest-side TCP connection, driven by the test.
struct Guest {
    Sim &sim;
    bool v6;
    uint8_t src[16]{}, dst[16]{};
    uint16_t sport, dport;
    uint32_t iss, snd_nxt, snd_una;
    uint32_t irs = 0, rcv_nxt = 0;
    uint16_t mss = 1460;
    int ws = 7;                   // what the guest offers (-1: none)
    uint16_t win_field = 65535;   // what it advertises
    uint32_t peer_wnd = 0;        // fast path's window, bytes
    int peer_ws = 0;
    uint16_t peer_mss = 0;
    bool got_fin = false, got_rst = false;
    // Keep data that arrives ahead of a gap (as Linux's out-of-order
    // queue does) and take it once the gap fills; else it is dropped.
    bool keep_ooo = false;
    std::map<uint32_t, Bytes> ooo; // by sequence number

    Guest(Sim &s, bool ipv6, uint16_t dst_port, uint16_t src_port = 40000,
          uint32_t isn = 1000)
        : sim(s), v6(ipv6), sport(src_port), dport(dst_port), iss(isn),
          snd_nxt(isn), snd_una(isn) {
        if (v6) {
            addr6(src, "fd00::100");
            addr6(dst, "fd00::2");
        } else {
            addr4(src, 10, 0, 2, 100);
            addr4(dst, 10, 0, 2, 2);
        }
    }
    Verdict send(uint8_t flags, uint32_t seq, const uint8_t *data = nullptr,
                 size_t len = 0, const Bytes &opts = {}) {
        return sim.input(guest_frame(v6, src, dst, sport, dport, flags, seq,
                                     (flags & kAck) ? rcv_nxt : 0, win_field, data,
                                     len, opts));
    }
    Verdict send_data(uint32_t seq, const Bytes &d, uint8_t extra = 0) {
        return send(uint8_t(kAck | extra), seq, d.data(), d.size());
    }
    Verdict ack() { return send(kAck, snd_nxt); }
    Verdict syn() {
        return send(kSyn, iss, nullptr, 0, syn_options(mss, ws));
    }
    bool mine(const Rx &r) const {
        return r.seg.dport == sport && r.seg.sport == dport && r.seg.v6 == v6;
    }
    // Pops the next frame for this connection, pumping up to ms.
    bool next(Rx &out, int ms = 2000) {
        for (int waited = 0;; waited += 2) {
            for (auto it = sim.rx.begin(); it != sim.rx.end(); ++it) {
                if (mine(*it)) {
                    out = std::move(*it);
                    sim.rx.erase(it);
                    out.seg.payload = out.data();
                    return true;
                }
            }
            if (waited >= ms) return false;
            sim.pump(2);
        }
    }
    // SYN, SYN-ACK, ACK. Returns false if the fast path answered otherwise.
    bool connect(Rx *synack_out = nullptr) {
        if (!syn_acked(synack_out)) return false;
        ack();
        return true;
    }
    // SYN and the SYN-ACK taken, our ACK not sent yet (the handshake half
    // done, as connect() leaves it before its last step).
    bool syn_acked(Rx *synack_out = nullptr) {
        if (syn() != Verdict::Consumed) return false;
        snd_nxt = iss + 1;
        snd_una = snd_nxt;
        Rx r;
        if (!next(r)) return false;
        if (synack_out) *synack_out = r;
        if ((r.seg.flags & (kSyn | kAck)) != (kSyn | kAck) || r.seg.ack != iss + 1)
            return false;
        irs = r.seg.seq;
        rcv_nxt = irs + 1;
        peer_mss = r.seg.mss;
        peer_ws = (ws >= 0 && r.seg.wscale >= 0) ? r.seg.wscale : 0;
        peer_wnd = r.seg.window; // unscaled in SYN-ACK
        return true;
    }
    // Absorbs one received frame's ACK/window/FIN/RST into the state; the
    // payload is returned if it is the in-order next data.
    bool absorb(const Rx &r, Bytes *inorder) {
        if (r.seg.flags & kRst) {
            got_rst = true;
            return false;
        }
        if (r.seg.flags & kAck) {
            if (int32_t(r.seg.ack - snd_una) > 0) snd_una = r.seg.ack;
            peer_wnd = uint32_t(r.seg.window) << peer_ws;
        }
        bool took = false;
        auto d = r.data();
        if (!d.empty() && r.seg.seq == rcv_nxt) {
            if (inorder) inorder->insert(inorder->end(), d.begin(), d.end());
            rcv_nxt += uint32_t(d.size());
            took = true;
            take_held(inorder);
        } else if (!d.empty() && keep_ooo && int32_t(r.seg.seq - rcv_nxt) > 0) {
            ooo.emplace(r.seg.seq, Bytes(d.begin(), d.end()));
        }
        if ((r.seg.flags & kFin) && r.seg.seq + r.seg.payload.size() == rcv_nxt) {
            rcv_nxt += 1;
            got_fin = true;
            took = true;
        }
        return took;
    }
    // Held data the in-order point has reached, as far as it is contiguous.
    void take_held(Bytes *inorder) {
        for (auto it = ooo.begin(); it != ooo.end();) {
            const uint32_t end = it->first + uint32_t(it->second.size());
            if (int32_t(it->first - rcv_nxt) > 0) break;
            if (int32_t(end - rcv_nxt) > 0) {
                const size_t skip = rcv_nxt - it->first;
                if (inorder) inorder->insert(inorder->end(), it->second.begin() + long(skip),
                                             it->second.end());
                rcv_nxt = end;
            }
            it = ooo.erase(it);
        }
    }
};

inline Bytes pattern(size_t n, uint32_t seed) {
    Bytes b(n);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; ++i) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b[i] = uint8_t(x);
    }
    return b;
}

// Non-blocking read of everything available on fd into out; returns 0 on
// EOF, -errno on error, else bytes read (possibly 0 for EAGAIN: then 1).
inline int drain(int fd, Bytes &out) {
    uint8_t buf[65536];
    int total = 0;
    for (;;) {
        ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            out.insert(out.end(), buf, buf + n);
            total += int(n);
            continue;
        }
        if (n == 0) return 0;
        if (errno == EAGAIN) return total + 1;
        return -errno;
    }
}

} // namespace tcpsim
