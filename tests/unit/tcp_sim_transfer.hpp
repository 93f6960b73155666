// SPDX-License-Identifier: Apache-2.0

// Test helpers for the TCP fast path: bulk transfers between a simulated
// guest (tcp_sim_guest.hpp) and a real host socket, both directions, with
// loss, reordering and partial ACKs on request.
#pragma once

#include <doctest/doctest.h>

#include "tcp_sim_guest.hpp"

namespace tcpsim {

// Accepts the fast path's connection on l, pumping the fast path meanwhile.
inline int accept_from(Sim &sim, const Listener &l, sockaddr_storage *peer = nullptr) {
    for (int i = 0; i < 1000; ++i) {
        int c = l.try_accept(peer);
        if (c >= 0) return c;
        sim.pump(2);
    }
    return -1;
}

// The opening of most stream tests (TEST_CASE_FIXTURE): the guest g
// connected through the fast path to the host listener l, c the host's
// accepted socket.
struct Accepted {
    Sim sim;
    Listener l;
    Guest g{sim, false, l.port};
    int c = -1;
    Accepted() : Accepted(true) {}

protected:
    // handshake_done false: the guest has our SYN-ACK but sent no ACK yet.
    explicit Accepted(bool handshake_done) {
        REQUIRE(handshake_done ? g.connect() : g.syn_acked());
        c = accept_from(sim, l);
        REQUIRE(c >= 0);
    }
};

// As Accepted, but the guest's ACK of our SYN-ACK not sent yet (g.ack()
// completes the handshake).
struct HalfAccepted : Accepted {
    HalfAccepted() : Accepted(false) {}
};

// Guest -> host: the guest sends data in super-frames within the fast
// path's window, retransmitting from the last ACK when nothing moves (its
// RTO); the host side reads everything. Returns what the host read.
inline Bytes guest_to_host(Sim &sim, Guest &g, int host_fd, const Bytes &data, size_t seg,
                    bool reorder_once = false) {
    Bytes got;
    const uint32_t base = g.snd_nxt;
    int idle = 0;
    bool reordered = false;
    while (got.size() < data.size()) {
        uint32_t acked = g.snd_una - base;
        uint32_t sent = g.snd_nxt - base;
        uint32_t wnd_end = acked + g.peer_wnd;
        bool progress = false;
        while (sent < data.size() && sent < wnd_end) {
            size_t len = std::min<size_t>({seg, data.size() - sent, wnd_end - sent});
            if (reorder_once && !reordered && sent > 0 && sent + len < data.size()) {
                // Send the next segment first, then this one.
                size_t len2 = std::min<size_t>(seg, data.size() - sent - len);
                Bytes b(data.begin() + sent + len, data.begin() + sent + len + len2);
                g.send_data(base + sent + uint32_t(len), b);
                reordered = true;
            }
            Bytes b(data.begin() + sent, data.begin() + sent + len);
            g.send_data(base + sent, b);
            sent += uint32_t(len);
            g.snd_nxt = base + sent;
        }
        Rx r;
        while (g.next(r, 0)) {
            uint32_t before = g.snd_una;
            g.absorb(r, nullptr);
            if (g.snd_una != before) progress = true;
        }
        size_t had = got.size();
        int d = drain(host_fd, got);
        REQUIRE(d != 0);
        if (got.size() != had) progress = true;
        sim.pump(1);
        if (progress) {
            idle = 0;
        } else if (++idle > 20) {
            g.snd_nxt = g.snd_una; // the guest's RTO: go back to the ACK
            idle = 0;
        }
        REQUIRE(int32_t(g.snd_una - g.snd_nxt) <= 0);
    }
    return got;
}

// Host -> guest: the host writes data; the guest takes in-order payload,
// ACKs each frame (optionally losing some) and returns what it assembled.
// The guest sends data from base (its snd_nxt then) within our window,
// all but keep bytes of it, to a host application that does not read,
// until nothing moves for 30 rounds: the window is then shut or nearly.
// Returns the smallest window the guest saw.
inline uint32_t fill_window(Sim &sim, Guest &g, const Bytes &data, uint32_t base,
                            size_t keep = 0) {
    size_t sent = 0;
    int still = 0;
    uint32_t min_wnd = UINT32_MAX;
    for (int i = 0; i < 3000 && still < 30; ++i) {
        uint32_t acked = g.snd_una - base;
        size_t edge = size_t(acked) + g.peer_wnd;
        size_t len = std::min<size_t>(
            {65000, data.size() - sent, edge > sent + keep ? edge - sent - keep : 0});
        if (len > 0) {
            g.send_data(base + uint32_t(sent),
                        Bytes(data.begin() + long(sent), data.begin() + long(sent + len)));
            sent += len;
        }
        Rx r;
        uint32_t before = g.snd_una;
        while (g.next(r, 0)) g.absorb(r, nullptr);
        min_wnd = std::min(min_wnd, g.peer_wnd);
        still = (g.snd_una == before && len == 0) ? still + 1 : 0;
        sent = g.snd_una - base; // what was refused goes again later
        sim.pump(0);
    }
    return min_wnd;
}

struct H2G {
    size_t gso_frames = 0, max_payload = 0;
    bool drop_first_data = false;   // lose one frame, answer with dup ACKs
    bool silent_drop = false;       // lose the last frame, say nothing (RTO)
    bool ack_half = false;          // ACK in two partial steps
    bool dup_acks = false;          // every ACK twice
};

inline Bytes host_to_guest(Sim &sim, Guest &g, int host_fd, const Bytes &data, H2G &o) {
    Bytes got;
    size_t written = 0;
    bool dropped = false;
    int idle = 0;
    for (int rounds = 0; got.size() < data.size(); ++rounds) {
        if (rounds >= 20000) {
            const auto &st = sim.fp->stats();
            MESSAGE("got " << got.size() << " written " << written << " rcv_nxt " << g.rcv_nxt
                    << " fastrx " << st.fast_retransmits << " rtx " << st.retransmits
                    << " dropped " << st.segments_dropped << " lost " << st.frames_lost
                    << " flows " << sim.fp->flows() << " rx " << sim.rx.size());
        }
        REQUIRE(rounds < 20000);
        while (written < data.size()) {
            ssize_t n = ::send(host_fd, data.data() + written, data.size() - written,
                               MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n <= 0) break;
            written += size_t(n);
        }
        sim.pump(1);
        Rx r;
        bool any = false;
        while (g.next(r, 0)) {
            any = true;
            REQUIRE(r.csum_ok);
            size_t plen = r.seg.payload.size();
            if (plen > 0) {
                o.max_payload = std::max(o.max_payload, plen);
                if (r.vnet.gso_type != 0) {
                    ++o.gso_frames;
                    CHECK(r.vnet.gso_size == g.mss);
                    CHECK(plen > g.mss);
                } else {
                    CHECK(plen <= g.mss);
                }
                // Never beyond the window the guest advertised.
                uint32_t wnd = uint32_t(g.win_field) << (g.ws >= 0 ? g.ws : 0);
                CHECK(int32_t(r.seg.seq + uint32_t(plen) - (g.rcv_nxt + wnd)) <= 0);
            }
            // Lose a frame in the middle of a burst (frames behind it make
            // the duplicate ACKs), or the last one (no frame comes after
            // it: only the timer can help, however much was in flight).
            bool more_behind = false;
            for (auto &q : sim.rx) more_behind = more_behind || (g.mine(q) && !q.seg.payload.empty());
            if (plen > 0 && !dropped && got.size() > 0 &&
                ((o.drop_first_data && more_behind) ||
                 (o.silent_drop && got.size() + plen == data.size()))) {
                dropped = true;
                if (o.drop_first_data) g.ack();
                continue;
            }
            uint32_t before = g.rcv_nxt;
            g.absorb(r, &got);
            if (g.rcv_nxt != before) {
                if (o.ack_half) {
                    uint32_t keep = g.rcv_nxt;
                    g.rcv_nxt = before + (keep - before) / 2;
                    g.ack();
                    g.rcv_nxt = keep;
                }
                g.ack();
                if (o.dup_acks) g.ack();
            } else if (plen > 0) {
                g.ack(); // out of order: duplicate ACK
            }
        }
        // Nothing for a while: let the retransmission timer run.
        idle = any ? 0 : idle + 1;
        if (idle > 50) {
            sim.advance(1100);
            idle = 0;
        }
    }
    return got;
}

// The fast path's own socket of a flow: the one whose local address is the
// accepted connection's peer (the test shares the process with it).
inline int flow_socket_of(int accepted) {
    sockaddr_storage peer{};
    socklen_t plen = sizeof peer;
    if (::getpeername(accepted, reinterpret_cast<sockaddr *>(&peer), &plen) < 0) return -1;
    for (int fd = 3; fd < 4096; ++fd) {
        sockaddr_storage me{};
        socklen_t mlen = sizeof me;
        if (fd == accepted || ::getsockname(fd, reinterpret_cast<sockaddr *>(&me), &mlen) < 0)
            continue;
        if (mlen == plen && std::memcmp(&me, &peer, plen) == 0) return fd;
    }
    return -1;
}

// A guest connection to a loopback listener, accepted on the host side,
// the window updates after the handshake consumed.
struct Conn {
    Sim sim;
    Listener l;
    Guest g;
    int c = -1;
    explicit Conn(FastPathConfig cfg = Sim::base_config(), bool v6 = false)
        : sim(std::move(cfg)), l(v6), g(sim, v6, l.port) {
        REQUIRE(g.connect());
        c = accept_from(sim, l);
        REQUIRE(c >= 0);
        Rx r;
        while (g.next(r, 20)) {}
    }
    Conn(const Conn &) = delete;
    Conn &operator=(const Conn &) = delete;
    ~Conn() {
        if (c >= 0) ::close(c);
    }
    const FastPathStats &stats() const { return sim.fp->stats(); }
};

// The guest reads and ACKs everything it is sent for up to rounds pump
// rounds; returns the in-order bytes, got_fin tells whether the FIN came.
inline Bytes receive_until_fin(Sim &sim, Guest &g, int rounds) {
    Bytes got;
    Rx r;
    for (int i = 0; i < rounds && !g.got_fin; ++i) {
        sim.pump(1);
        bool any = false;
        while (g.next(r, 0)) {
            g.absorb(r, &got);
            any = true;
        }
        if (any) g.ack();
    }
    return got;
}

} // namespace tcpsim
