// SPDX-License-Identifier: Apache-2.0

// Test helpers for forwarded ports on the TCP fast path: a loopback
// forward, a host client connected to it, the guest's MAC taught to the
// fast path, and the guest side of a forwarded connection (the server).
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "tcp_sim_transfer.hpp"

namespace tcpsim {

inline constexpr uint32_t kGuest4 = 0x0a000264; // 10.0.2.100
inline constexpr uint16_t kGuestPort = 8080;

// A loopback port nobody listens on right now.
inline uint16_t free_port(bool v6 = false) {
    Listener l(v6);
    return l.port;
}

inline sockaddr_storage loopback(uint16_t port, bool v6 = false) {
    sockaddr_storage ss{};
    if (v6) {
        auto *a = reinterpret_cast<sockaddr_in6 *>(&ss);
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        a->sin6_port = htons(port);
    } else {
        auto *a = reinterpret_cast<sockaddr_in *>(&ss);
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a->sin_port = htons(port);
    }
    return ss;
}

inline socklen_t len_of(bool v6) { return v6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in); }

inline int add(Sim &sim, uint16_t port, bool v6 = false) {
    sockaddr_storage ss = loopback(port, v6);
    return sim.fp->add_forward(reinterpret_cast<sockaddr *>(&ss), len_of(v6), kGuest4,
                               kGuestPort);
}

// A blocking client connected to the forward (the kernel completes the
// handshake from the listener's backlog); its local port in *port.
inline int client(uint16_t fwd_port, uint16_t *port, bool v6 = false) {
    int c = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_storage ss = loopback(fwd_port, v6);
    if (::connect(c, reinterpret_cast<sockaddr *>(&ss), len_of(v6)) < 0) {
        ::close(c);
        return -1;
    }
    socklen_t l = sizeof ss;
    ::getsockname(c, reinterpret_cast<sockaddr *>(&ss), &l);
    *port = ntohs(v6 ? reinterpret_cast<sockaddr_in6 &>(ss).sin6_port
                     : reinterpret_cast<sockaddr_in &>(ss).sin_port);
    return c;
}

// Any frame from the guest teaches the fast path its MAC (here: an ARP
// reply, which stays libslirp's).
inline void guest_arp_reply(Sim &sim) {
    Bytes f(42, 0);
    std::memset(f.data(), 0x52, 6);
    std::memcpy(f.data() + 6, kGuestMac, 6);
    f[12] = 0x08;
    f[13] = 0x06;
    const uint8_t arp[8] = {0, 1, 0x08, 0, 6, 4, 0, 2};
    std::memcpy(f.data() + 14, arp, 8);
    std::memcpy(f.data() + 22, kGuestMac, 6);
    const uint8_t ip[4] = {10, 0, 2, 100};
    std::memcpy(f.data() + 28, ip, 4);
    CHECK(sim.input(f) == Verdict::NotMine);
}

// Pumps until the fast path asks for the guest's MAC (an ARP request):
// that frame, or an empty one if none came within a second.
inline Bytes await_arp(Sim &sim) {
    for (int i = 0; i < 500; ++i) {
        sim.pump(2);
        for (auto &r : sim.rx)
            if (r.frame.size() == 42 && r.frame[12] == 0x08 && r.frame[13] == 0x06) {
                CHECK(r.vnet.flags == 0);
                return r.frame;
            }
    }
    return {};
}

// The opening of most forward tests (TEST_CASE_FIXTURE): a forward of a
// free loopback port to the guest, whose MAC the fast path knows, and a
// host client c connected to it from local port cport.
struct Forwarded {
    Sim sim;
    uint16_t port = free_port();
    uint16_t cport = 0;
    int c = -1;
    Forwarded() {
        REQUIRE(add(sim, port) == 0);
        guest_arp_reply(sim);
        c = client(port, &cport);
    }
};

// A forward on a free loopback port, the guest's MAC known, and a host
// client connected to it (its port in *cport); the client's fd.
inline int forwarded_client(Sim &sim, uint16_t *cport) {
    uint16_t port = free_port();
    REQUIRE(add(sim, port) == 0);
    guest_arp_reply(sim);
    int c = client(port, cport);
    REQUIRE(c >= 0);
    return c;
}

// The guest side of a forwarded connection: the guest is the server, so
// its "source" is the guest port and its "destination" the client's port
// as the fast path translated it (10.0.2.2 for a loopback client).
struct Server : Guest {
    Server(Sim &s, uint16_t client_port) : Guest(s, false, client_port, kGuestPort, 7000) {}
    // Waits for the fast path's SYN, answers it with a SYN-ACK and checks
    // the ACK that completes the handshake.
    bool accept(Rx *syn_out = nullptr) {
        Rx syn;
        if (!next(syn)) return false;
        if (syn_out) *syn_out = syn;
        if (syn.seg.flags != kSyn) return false;
        irs = syn.seg.seq;
        rcv_nxt = irs + 1;
        peer_mss = syn.seg.mss;
        peer_ws = (ws >= 0 && syn.seg.wscale >= 0) ? syn.seg.wscale : 0;
        peer_wnd = syn.seg.window;
        if (send(kSyn | kAck, iss, nullptr, 0, syn_options(mss, ws)) != Verdict::Consumed)
            return false;
        snd_nxt = snd_una = iss + 1;
        Rx ack;
        if (!next(ack)) return false;
        absorb(ack, nullptr);
        return ack.seg.flags == kAck && ack.seg.ack == iss + 1 && ack.seg.seq == irs + 1;
    }
};

// What a host client's read ends in: 0 at EOF, the errno of a failed
// read, EAGAIN if nothing came within 400 ms.
inline int recv_error(int fd) {
    char b[16];
    for (int i = 0; i < 200; ++i) {
        ssize_t n = ::recv(fd, b, sizeof b, MSG_DONTWAIT);
        if (n < 0 && errno != EAGAIN) return errno;
        if (n == 0) return 0;
        ::usleep(2000);
    }
    return EAGAIN;
}

// The same, pumping the fast path meanwhile: 0 at EOF, the errno of a
// failed read, EAGAIN if nothing came.
inline int pumped_recv_error(Sim &sim, int fd) {
    for (int i = 0; i < 500; ++i) {
        sim.pump(2);
        char b;
        ssize_t n = ::recv(fd, &b, 1, MSG_DONTWAIT);
        if (n == 0) return 0;
        if (n < 0 && errno != EAGAIN) return errno;
    }
    return EAGAIN;
}

} // namespace tcpsim
