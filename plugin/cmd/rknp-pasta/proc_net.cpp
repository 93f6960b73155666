// SPDX-License-Identifier: Apache-2.0

// Listening ports from /proc/net/{tcp,udp}[6] text (see proc_net.hpp).
#include "proc_net.hpp"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>

namespace pasta {

namespace {

constexpr unsigned kTcpListen = 0x0A;
constexpr unsigned kUdpClose = 0x07; // bound, not connected

bool hex(std::string_view s, unsigned &v) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
    return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

// One address word as the kernel prints it ("%08X" of the network-order
// 32 bits read as a native integer: 127.0.0.1 is "0100007F" on
// little-endian hosts, "7F000001" on big-endian ones), back to its four
// bytes in address order.
bool word_bytes(std::string_view s, unsigned char *out) {
    unsigned v = 0;
    if (s.size() != 8 || !hex(s, v)) return false;
    uint32_t w = v;
    std::memcpy(out, &w, sizeof w);
    return true;
}

enum class Bound { loopback, any, other, invalid };

// 8 hex digits (IPv4) or 32 (IPv6, four words): loopback is 127.0.0.0/8,
// ::1 or ::ffff:127.0.0.0/104 (an IPv6 socket bound to a mapped 127
// address); any is 0.0.0.0, :: or ::ffff:0.0.0.0.
Bound bound_to(std::string_view addr) {
    unsigned char b[16];
    if (addr.size() == 8) {
        if (!word_bytes(addr, b)) return Bound::invalid;
        if (b[0] == 127) return Bound::loopback;
        return b[0] == 0 && b[1] == 0 && b[2] == 0 && b[3] == 0 ? Bound::any : Bound::other;
    }
    if (addr.size() != 32) return Bound::invalid;
    for (size_t i = 0; i < 4; i++)
        if (!word_bytes(addr.substr(8 * i, 8), b + 4 * i)) return Bound::invalid;
    static constexpr unsigned char kZero[16] = {};
    static constexpr unsigned char kLoopback6[16] = {0, 0, 0, 0, 0, 0, 0, 0,
                                                     0, 0, 0, 0, 0, 0, 0, 1};
    static constexpr unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0,
                                                  0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(b, kLoopback6, 16) == 0 ||
        (std::memcmp(b, kMapped, 12) == 0 && b[12] == 127))
        return Bound::loopback;
    if (std::memcmp(b, kZero, 16) == 0 ||
        (std::memcmp(b, kMapped, 12) == 0 && std::memcmp(b + 12, kZero, 4) == 0))
        return Bound::any;
    return Bound::other;
}

// Splits a line into whitespace-separated fields, up to n of them.
size_t fields(std::string_view line, std::string_view *out, size_t n) {
    size_t k = 0, i = 0;
    while (k < n) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) i++;
        if (i >= line.size()) break;
        size_t j = line.find_first_of(" \t", i);
        if (j == std::string_view::npos) j = line.size();
        out[k++] = line.substr(i, j - i);
        i = j;
    }
    return k;
}

template <class Wanted>
std::set<unsigned> open_ports(std::string_view text, SocketKind kind, Wanted wanted) {
    std::set<unsigned> ports;
    size_t pos = text.find('\n'); // the header line
    while (pos != std::string_view::npos && pos < text.size()) {
        size_t end = text.find('\n', pos + 1);
        std::string_view line = text.substr(
            pos + 1, end == std::string_view::npos ? std::string_view::npos
                                                   : end - pos - 1);
        pos = end;
        // sl local_address rem_address st ...
        std::string_view f[4];
        if (fields(line, f, 4) < 4) continue;
        size_t lc = f[1].find(':'), rc = f[2].find(':');
        if (lc == std::string_view::npos || rc == std::string_view::npos)
            continue;
        unsigned st = 0, port = 0, rport = 0;
        if (!hex(f[3], st) || !hex(f[1].substr(lc + 1), port) ||
            !hex(f[2].substr(rc + 1), rport))
            continue;
        bool open = kind == SocketKind::tcp ? st == kTcpListen
                                            : st == kUdpClose && rport == 0;
        if (!open || port == 0 || port > 65535) continue;
        if (wanted(bound_to(f[1].substr(0, lc)))) ports.insert(port);
    }
    return ports;
}

} // namespace

std::set<unsigned> listening_ports(std::string_view text, SocketKind kind) {
    return open_ports(text, kind, [](Bound b) { return b != Bound::loopback; });
}

std::set<unsigned> loopback_reachable_ports(std::string_view text, SocketKind kind) {
    return open_ports(text, kind, [](Bound b) { return b == Bound::any || b == Bound::loopback; });
}

std::set<unsigned> loopback_ports(std::string_view text, SocketKind kind) {
    return open_ports(text, kind, [](Bound b) { return b == Bound::loopback; });
}

bool read_proc_net(int fd, std::string &out) {
    out.clear();
    char buf[16384];
    if (::lseek(fd, 0, SEEK_SET) < 0) return false;
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return false;
        if (n == 0) return true;
        out.append(buf, size_t(n));
    }
}

} // namespace pasta
