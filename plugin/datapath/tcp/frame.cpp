// SPDX-License-Identifier: Apache-2.0

// Parsing of guest TCP frames and building of guest-bound TCP headers.
#include "datapath/tcp/frame.hpp"

#include <cstring>

#include "datapath/checksum.hpp"
#include "datapath/flows/ip_packet.hpp"

namespace rknp::tcp {

namespace {

constexpr uint8_t kOptEol = 0, kOptNop = 1, kOptMss = 2, kOptWs = 3, kOptSackOk = 4;

inline void put_be32(uint8_t *p, uint32_t v) {
    p[0] = uint8_t(v >> 24);
    p[1] = uint8_t(v >> 16);
    p[2] = uint8_t(v >> 8);
    p[3] = uint8_t(v);
}

// Options as Linux reads them (tcp_parse_options): a broken length ends
// the walk, a known kind with the wrong length is ignored. Nothing here
// can read outside [p, p + len).
void parse_options(const uint8_t *p, size_t len, Segment &s) {
    size_t i = 0;
    while (i < len) {
        uint8_t kind = p[i];
        if (kind == kOptEol) return;
        if (kind == kOptNop) {
            ++i;
            continue;
        }
        if (i + 1 >= len) return;
        uint8_t olen = p[i + 1];
        if (olen < 2 || olen > len - i) return;
        if (kind == kOptMss && olen == 4)
            s.mss = be16(p + i + 2);
        else if (kind == kOptWs && olen == 3)
            s.wscale = p[i + 2];
        else if (kind == kOptSackOk && olen == 2)
            s.sack_ok = true;
        i += olen;
    }
}

} // namespace

Parse parse_segment(std::span<const uint8_t> frame, Segment &s) {
    IpPacket ip;
    if (const Parse v = parse_ip(frame, kProtoTcp, kProtoTcp, ip); v != Parse::Ok)
        return v; // NotMine or Malformed, as the IP layer says
    // An IPv6 payload length of 0 (a jumbogram's) falls here too.
    const uint8_t *l4 = ip.l4.data();
    const size_t l4_len = ip.l4.size();
    if (l4_len < kTcpLen) return Parse::Malformed;
    size_t doff = size_t(l4[12] >> 4) * 4;
    if (doff < kTcpLen || doff > l4_len) return Parse::Malformed;
    s.v6 = ip.v6;
    std::memcpy(s.src, ip.src, 16);
    std::memcpy(s.dst, ip.dst, 16);
    std::memcpy(s.src_mac, frame.data() + 6, 6);
    s.sport = be16(l4);
    s.dport = be16(l4 + 2);
    s.seq = be32(l4 + 4);
    s.ack = be32(l4 + 8);
    s.flags = l4[13];
    s.window = be16(l4 + 14);
    s.mss = 0;
    s.wscale = -1;
    s.sack_ok = false;
    parse_options(l4 + kTcpLen, doff - kTcpLen, s);
    s.payload = {l4 + doff, l4_len - doff};
    return Parse::Ok;
}

size_t build_segment(uint8_t *h, VnetHdr &vnet, const Endpoints &ep,
                     const OutFields &f, size_t payload_len, uint16_t mss) {
    std::memcpy(h, ep.guest_mac, 6);
    std::memcpy(h + 6, ep.gw_mac, 6);
    size_t opt_len = 0;
    uint8_t opts[8];
    if (f.mss_opt != 0) {
        opts[0] = kOptMss;
        opts[1] = 4;
        put_be16(opts + 2, f.mss_opt);
        opt_len = 4;
    }
    if (f.ws_opt >= 0) {
        opts[opt_len++] = kOptNop;
        opts[opt_len++] = kOptWs;
        opts[opt_len++] = 3;
        opts[opt_len++] = uint8_t(f.ws_opt);
    }
    const size_t tcp_len = kTcpLen + opt_len;
    const size_t l4_len = tcp_len + payload_len;
    uint8_t *ip = h + kEthLen;
    size_t ip_len;
    uint64_t pseudo;
    if (ep.v6) {
        put_be16(h + 12, 0x86dd);
        ip_len = kIp6Len;
        put_be32(ip, 0x60000000);
        put_be16(ip + 4, uint16_t(l4_len));
        ip[6] = 6;
        ip[7] = 64;
        std::memcpy(ip + 8, ep.remote, 16);
        std::memcpy(ip + 24, ep.guest, 16);
        uint8_t tail[8] = {0, 0, uint8_t(l4_len >> 8), uint8_t(l4_len), 0, 0, 0, 6};
        pseudo = csum_add(csum_add(0, ip + 8, 32), tail, 8);
    } else {
        put_be16(h + 12, 0x0800);
        ip_len = kIp4Len;
        ip[0] = 0x45;
        ip[1] = 0;
        put_be16(ip + 2, uint16_t(kIp4Len + l4_len));
        put_be16(ip + 4, f.ip_id);
        put_be16(ip + 6, 0x4000); // DF: the guest's PMTU logic stays sane
        ip[8] = 64;
        ip[9] = 6;
        std::memcpy(ip + 12, ep.remote + 12, 4);
        std::memcpy(ip + 16, ep.guest + 12, 4);
        set_ipv4_checksum(ip, kIp4Len);
        uint8_t tail[4] = {0, 6, uint8_t(l4_len >> 8), uint8_t(l4_len)};
        pseudo = csum_add(csum_add(0, ip + 12, 8), tail, 4);
    }
    uint8_t *tcp = ip + ip_len;
    put_be16(tcp, ep.remote_port);
    put_be16(tcp + 2, ep.guest_port);
    put_be32(tcp + 4, f.seq);
    put_be32(tcp + 8, f.ack);
    tcp[12] = uint8_t((tcp_len / 4) << 4);
    tcp[13] = f.flags;
    put_be16(tcp + 14, f.window);
    put_be16(tcp + 16, csum_fold(pseudo)); // partial: completed by the guest
    put_be16(tcp + 18, 0);                 // no urgent data, ever
    std::memcpy(tcp + kTcpLen, opts, opt_len);

    const size_t hdr_len = kEthLen + ip_len + tcp_len;
    vnet = VnetHdr{};
    vnet.flags = kVnetNeedsCsum;
    vnet.hdr_len = uint16_t(hdr_len);
    vnet.csum_start = uint16_t(kEthLen + ip_len);
    vnet.csum_offset = 16;
    if (mss != 0 && payload_len > mss) {
        vnet.gso_type = ep.v6 ? kVnetGsoTcp6 : kVnetGsoTcp4;
        vnet.gso_size = mss;
    }
    return hdr_len;
}

} // namespace rknp::tcp
