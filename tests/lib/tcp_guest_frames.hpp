// SPDX-License-Identifier: Apache-2.0

// Guest-side TCP frame helpers shared by the fast path's unit tests
// (tests/unit/tcp_sim_guest.hpp) and its fuzz target
// (tests/fuzz/target_tcp.cpp): building a complete Ethernet/IPv4|IPv6/TCP
// frame as a guest sends it, SYN options, and verifying a guest-bound
// frame's checksums the way the guest's kernel would complete them.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "datapath/checksum.hpp"
#include "datapath/offload.hpp"
#include "datapath/tcp/frame.hpp"

namespace tcpsim {

using Bytes = std::vector<uint8_t>;
using namespace rknp;
using namespace rknp::tcp;

inline void put16(uint8_t *p, uint16_t v) { p[0] = uint8_t(v >> 8); p[1] = uint8_t(v); }
inline void put32(uint8_t *p, uint32_t v) {
    p[0] = uint8_t(v >> 24); p[1] = uint8_t(v >> 16); p[2] = uint8_t(v >> 8); p[3] = uint8_t(v);
}

inline const uint8_t kGuestMac[6] = {0x02, 0x42, 0xac, 0x11, 0x00, 0x02};

// Addresses as 16 bytes (IPv4 mapped).
inline void addr4(uint8_t out[16], uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
    uint8_t v4[4] = {a, b, c, d};
    map_v4(v4, out);
}
inline void addr6(uint8_t out[16], const char *s) { inet_pton(AF_INET6, s, out); }

// A TCP segment from the guest, headers and checksums complete.
inline Bytes guest_frame(bool v6, const uint8_t src[16], const uint8_t dst[16],
                         uint16_t sport, uint16_t dport, uint8_t flags, uint32_t seq,
                         uint32_t ack, uint16_t window, const uint8_t *data, size_t len,
                         const Bytes &opts = {}) {
    size_t ip_len = v6 ? 40 : 20, tcp_len = 20 + opts.size();
    Bytes f(14 + ip_len + tcp_len + len, 0);
    uint8_t *p = f.data();
    std::memset(p, 0x52, 6);
    std::memcpy(p + 6, kGuestMac, 6);
    put16(p + 12, v6 ? 0x86dd : 0x0800);
    uint8_t *ip = p + 14;
    size_t l4 = tcp_len + len;
    uint64_t pseudo;
    if (v6) {
        put32(ip, 0x60000000);
        put16(ip + 4, uint16_t(l4));
        ip[6] = 6;
        ip[7] = 64;
        std::memcpy(ip + 8, src, 16);
        std::memcpy(ip + 24, dst, 16);
        uint8_t t[8] = {0, 0, uint8_t(l4 >> 8), uint8_t(l4), 0, 0, 0, 6};
        pseudo = csum_add(csum_add(0, ip + 8, 32), t, 8);
    } else {
        ip[0] = 0x45;
        put16(ip + 2, uint16_t(20 + l4));
        put16(ip + 6, 0x4000);
        ip[8] = 64;
        ip[9] = 6;
        std::memcpy(ip + 12, src + 12, 4);
        std::memcpy(ip + 16, dst + 12, 4);
        put16(ip + 10, uint16_t(~csum_fold(csum_add(0, ip, 20))));
        uint8_t t[4] = {0, 6, uint8_t(l4 >> 8), uint8_t(l4)};
        pseudo = csum_add(csum_add(0, ip + 12, 8), t, 4);
    }
    uint8_t *tcp = ip + ip_len;
    put16(tcp, sport);
    put16(tcp + 2, dport);
    put32(tcp + 4, seq);
    put32(tcp + 8, ack);
    tcp[12] = uint8_t((tcp_len / 4) << 4);
    tcp[13] = flags;
    put16(tcp + 14, window);
    if (!opts.empty()) std::memcpy(tcp + 20, opts.data(), opts.size());
    if (len != 0) std::memcpy(tcp + tcp_len, data, len);
    put16(tcp + 16, uint16_t(~csum_fold(csum_add(pseudo, tcp, l4))));
    return f;
}

inline Bytes syn_options(uint16_t mss, int ws) {
    Bytes o = {2, 4, uint8_t(mss >> 8), uint8_t(mss)};
    if (ws >= 0) {
        o.push_back(1);
        o.push_back(3);
        o.push_back(3);
        o.push_back(uint8_t(ws));
    }
    return o;
}

// Completes the partial checksum the way the guest's NIC path would and
// verifies TCP (and IPv4 header) sums.
inline bool checksums_ok(Bytes f, const VnetHdr &h) {
    if (!(h.flags & kVnetNeedsCsum) || !complete_checksum(f, h)) return false;
    const uint8_t *ip = f.data() + 14;
    bool v6 = (ip[0] >> 4) == 6;
    size_t ip_len = v6 ? 40 : 20;
    size_t l4 = f.size() - 14 - ip_len;
    uint64_t pseudo;
    if (v6) {
        uint8_t t[8] = {0, 0, uint8_t(l4 >> 8), uint8_t(l4), 0, 0, 0, 6};
        pseudo = csum_add(csum_add(0, ip + 8, 32), t, 8);
    } else {
        if (csum_fold(csum_add(0, ip, 20)) != 0xffff) return false;
        uint8_t t[4] = {0, 6, uint8_t(l4 >> 8), uint8_t(l4)};
        pseudo = csum_add(csum_add(0, ip + 12, 8), t, 4);
    }
    return csum_fold(csum_add(pseudo, ip + ip_len, l4)) == 0xffff;
}

} // namespace tcpsim
