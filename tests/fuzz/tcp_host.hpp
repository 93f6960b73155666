// SPDX-License-Identifier: Apache-2.0

// The tcp fuzz target's host side (target_tcp.cpp): the bytes every
// stream carries, the guest's 4-tuples and where they lead, the loopback
// listeners and the host peers of one input, and the private namespace's
// small TCP send buffers.
#pragma once

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "fuzz_input.hpp"

namespace fuzz::tcp_host {

inline constexpr size_t kMaxHostConns = 64;
inline constexpr uint32_t kAmountMax = 65536;

// The byte at offset i of every stream: an integer hash of i / 4, so a
// stream shifted by any amount does not match itself.
inline uint8_t stream_byte(uint32_t i) {
    uint32_t x = i >> 2;
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return uint8_t(x >> (8 * (i & 3)));
}

inline void fill_stream(uint8_t *out, uint32_t from, size_t n) {
    for (size_t j = 0; j < n; ++j) out[j] = stream_byte(from + uint32_t(j));
}

inline bool is_stream(const uint8_t *p, uint32_t from, size_t n) {
    for (size_t j = 0; j < n; ++j)
        if (p[j] != stream_byte(from + uint32_t(j))) return false;
    return true;
}

// The guest's 4-tuples and where the fast path sends them.
struct TupleDef {
    bool v6;
    const char *dst;
    uint16_t sport, dport;
};
inline constexpr TupleDef kTuples[8] = {
    {false, "10.0.2.2", 40000, 8080}, // gateway: 127.0.0.1:8080
    {false, "10.0.2.2", 40001, 8081}, // 127.0.0.1:8081, small receive buffer
    {true, "fd00::2", 40002, 8080},   // [::1]:8080
    {true, "fd00::2", 40003, 8081},   // [::1]:8081, small receive buffer
    {false, "10.0.2.2", 40004, 8080}, // a second flow to the same listener
    {false, "10.0.2.2", 40005, 8082}, // nothing listens: refused
    // Another host: unreachable in the namespace (only lo exists), so the
    // connect fails at once and the guest gets an RST.
    {true, "2001:db8::1", 40006, 80},
    {false, "10.0.2.3", 40007, 53}, // the DNS address: libslirp's
};

inline int listeners[4] = {-1, -1, -1, -1};

inline int listen_on(bool v6, uint16_t port, bool small_rcvbuf) {
    int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) fuzz::fail("listener socket");
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (small_rcvbuf) { // inherited by accepted connections
        int sz = 4096;
        ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    }
    sockaddr_storage ss{};
    socklen_t len;
    if (v6) {
        auto *a = reinterpret_cast<sockaddr_in6 *>(&ss);
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        a->sin6_port = htons(port);
        len = sizeof *a;
    } else {
        auto *a = reinterpret_cast<sockaddr_in *>(&ss);
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a->sin_port = htons(port);
        len = sizeof *a;
    }
    if (::bind(fd, reinterpret_cast<sockaddr *>(&ss), len) < 0 || ::listen(fd, 256) < 0)
        fuzz::fail("listener bind/listen");
    return fd;
}

inline size_t count_fds() {
    DIR *d = ::opendir("/proc/self/fd");
    if (d == nullptr) fuzz::fail("opendir /proc/self/fd");
    size_t n = 0;
    while (dirent *e = ::readdir(d))
        if (e->d_name[0] != '.') ++n;
    ::closedir(d);
    return n;
}

inline void close_rst(int fd) {
    linger l{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    ::close(fd);
}

// The host peers of one input: connections accepted on the listeners.
struct Host {
    struct Conn {
        int fd = -1;
        uint32_t read = 0, written = 0;
    };
    std::vector<Conn> conns;
    uint64_t read_total = 0;
    uint32_t written_max = 0; // bound on any flow's host -> guest stream

    void accept_all() {
        for (int l : listeners)
            while (conns.size() < kMaxHostConns) {
                int c = ::accept4(l, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (c < 0) break;
                conns.push_back(Conn{c});
            }
    }
    void read(Conn &c, uint32_t amount) {
        static uint8_t buf[kAmountMax];
        ssize_t n = ::recv(c.fd, buf, std::min<uint32_t>(amount, kAmountMax), MSG_DONTWAIT);
        if (n <= 0) return; // EOF, reset, nothing yet: the next read says again
        fuzz::require(is_stream(buf, c.read, size_t(n)),
                      "host received bytes the guest did not send there");
        c.read += uint32_t(n);
        read_total += uint64_t(n);
    }
    void write(Conn &c, uint32_t amount) {
        static uint8_t buf[kAmountMax];
        amount = std::min(amount, kAmountMax);
        fill_stream(buf, c.written, amount);
        ssize_t n = ::send(c.fd, buf, amount, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n <= 0) return;
        c.written += uint32_t(n);
        written_max = std::max(written_max, c.written);
    }
    void act(size_t which, uint8_t action, uint32_t amount) {
        if (conns.empty()) return;
        Conn &c = conns[which % conns.size()];
        if (c.fd < 0) return;
        switch (action % 6) {
        case 0:
            read(c, amount);
            break;
        case 1:
            write(c, amount);
            break;
        case 2: // echo: write back as much as was read
            if (c.read > c.written) write(c, c.read - c.written);
            break;
        case 3:
            ::shutdown(c.fd, SHUT_WR);
            break;
        case 4:
            ::close(c.fd);
            c.fd = -1;
            break;
        case 5:
            close_rst(c.fd);
            c.fd = -1;
            break;
        }
    }
    // Closes everything, also what is still in the accept queues, with RST
    // (no TIME_WAIT piles up over millions of inputs).
    void close_all() {
        for (Conn &c : conns)
            if (c.fd >= 0) close_rst(c.fd);
        conns.clear();
        for (int l : listeners)
            for (int c; (c = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;)
                close_rst(c);
    }
};

// TCP send buffers in the private namespace: at most 128 KiB instead of
// 4 MiB, so a host peer that stops reading fills the fast path's socket
// within a few guest segments (partial sends, shrinking windows, window
// updates) rather than after more data than an input can describe.
inline void small_send_buffers() {
    FILE *f = std::fopen("/proc/sys/net/ipv4/tcp_wmem", "w");
    if (f == nullptr || std::fputs("4096 16384 131072", f) < 0 || std::fclose(f) != 0)
        fuzz::fail("cannot set tcp_wmem in the private namespace");
}

} // namespace fuzz::tcp_host
