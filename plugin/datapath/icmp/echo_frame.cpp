// SPDX-License-Identifier: Apache-2.0

// Parsing guest echo requests and writing echo replies to the guest.
#include "datapath/icmp/echo_frame.hpp"

#include <algorithm>
#include <cstring>

#include "datapath/checksum.hpp"
#include "datapath/flows/ip_packet.hpp"
#include "datapath/offload.hpp"

namespace rknp::icmp {

namespace {

constexpr uint16_t kIpv4 = 0x0800, kIpv6 = 0x86dd;
constexpr uint8_t kProtoIcmp = 1, kProtoIcmp6 = 58;
constexpr uint8_t kTtl = 64; // as the TCP fast path's frames

// The ICMPv6 pseudo-header sum (RFC 8200 8.1) of a message of len bytes.
uint64_t pseudo6(const uint8_t src[16], const uint8_t dst[16], size_t len) {
    uint8_t tail[8] = {uint8_t(len >> 24), uint8_t(len >> 16), uint8_t(len >> 8),
                       uint8_t(len), 0, 0, 0, kProtoIcmp6};
    return csum_add(csum_add(csum_add(0, src, 16), dst, 16), tail, 8);
}

void put_eth(uint8_t *f, const ReplyEnds &e, uint16_t type) {
    std::memcpy(f, e.guest_mac, 6);
    std::memcpy(f + 6, e.gw_mac, 6);
    put_be16(f + 12, type);
}

// An IPv4 header (20 bytes, no options) with its checksum.
void put_ip4(uint8_t *ip, const ReplyEnds &e, size_t total, uint16_t id,
             uint16_t frag) {
    ip[0] = 0x45;
    ip[1] = 0;
    put_be16(ip + 2, uint16_t(total));
    put_be16(ip + 4, id);
    put_be16(ip + 6, frag);
    ip[8] = kTtl;
    ip[9] = kProtoIcmp;
    std::memcpy(ip + 12, e.remote + 12, 4);
    std::memcpy(ip + 16, e.guest + 12, 4);
    set_ipv4_checksum(ip, kIp4Len);
}

} // namespace

Parse parse_echo_request(std::span<const uint8_t> frame, EchoRequest &r) {
    IpPacket ip;
    if (const Parse v = parse_ip(frame, kProtoIcmp, kProtoIcmp6, ip); v != Parse::Ok)
        return v; // NotMine or Malformed, as the IP layer says
    const uint8_t *l4 = ip.l4.data();
    if (ip.l4.size() < kIcmpLen) return Parse::Malformed;
    if (l4[0] != (ip.v6 ? kEchoRequest6 : kEchoRequest4)) return Parse::NotMine;
    if (!ip.v6 && csum_fold(csum_add(0, ip.header.data(), ip.header.size())) != 0xffff)
        return Parse::Malformed;
    // Ping sockets send only code 0 (EINVAL otherwise); neither RFC 792
    // nor 4443 defines another.
    if (l4[1] != 0) return Parse::Malformed;
    r.v6 = ip.v6;
    std::memcpy(r.src, ip.src, 16);
    std::memcpy(r.dst, ip.dst, 16);
    std::memcpy(r.src_mac, frame.data() + 6, 6);
    r.id = be16(l4 + 4);
    r.seq = be16(l4 + 6);
    r.message = ip.l4;
    r.packet = {ip.header.data(), ip.header.size() + ip.l4.size()};
    return Parse::Ok;
}

bool echo_checksum_ok(const EchoRequest &r) {
    uint64_t sum = csum_add(0, r.message.data(), r.message.size());
    if (r.v6) sum += pseudo6(r.src, r.dst, r.message.size());
    return csum_fold(sum) == 0xffff;
}

size_t write_reply(GuestSink &sink, const ReplyEnds &e, uint8_t *msg,
                   size_t len, uint32_t mtu, uint16_t ip_id) {
    if (len < kIcmpLen) return 0;
    const VnetHdr vnet{}; // checksums complete, no GSO
    msg[0] = e.v6 ? kEchoReply6 : kEchoReply4;
    msg[1] = 0;
    put_be16(msg + 2, 0);
    put_be16(msg + 4, e.guest_id);
    uint64_t sum = csum_add(0, msg, len);
    if (e.v6) {
        if (len > kMaxMessage || kIp6Len + len > mtu) return 0;
        sum += pseudo6(e.remote, e.guest, len);
        put_be16(msg + 2, uint16_t(~csum_fold(sum)));
        uint8_t *f = msg - kEthLen - kIp6Len;
        put_eth(f, e, kIpv6);
        uint8_t *ip = f + kEthLen;
        ip[0] = 0x60;
        ip[1] = ip[2] = ip[3] = 0;
        put_be16(ip + 4, uint16_t(len));
        ip[6] = kProtoIcmp6;
        ip[7] = kTtl;
        std::memcpy(ip + 8, e.remote, 16);
        std::memcpy(ip + 24, e.guest, 16);
        sink.write_frame(vnet, {f, kEthLen + kIp6Len + len}, {});
        return 1;
    }
    if (len > kMaxMessage4) return 0;
    put_be16(msg + 2, uint16_t(~csum_fold(sum)));
    if (kIp4Len + len <= mtu) {
        uint8_t *f = msg - kEthLen - kIp4Len;
        put_eth(f, e, kIpv4);
        put_ip4(f + kEthLen, e, kIp4Len + len, ip_id, 0);
        sink.write_frame(vnet, {f, kEthLen + kIp4Len + len}, {});
        return 1;
    }
    // Fragments: every one but the last carries a multiple of 8 bytes; an
    // MTU below IPv4's minimum (68) is taken as that minimum.
    const size_t chunk = (std::max<size_t>(mtu, 68) - kIp4Len) & ~size_t(7);
    uint8_t hdr[kEthLen + kIp4Len];
    size_t frames = 0;
    for (size_t off = 0; off < len; off += chunk) {
        const size_t n = std::min(chunk, len - off);
        const bool more = off + n < len;
        put_eth(hdr, e, kIpv4);
        put_ip4(hdr + kEthLen, e, kIp4Len + n, ip_id,
                uint16_t((more ? 0x2000 : 0) | (off / 8)));
        sink.write_frame(vnet, {hdr, sizeof hdr}, {msg + off, n});
        ++frames;
    }
    return frames;
}

void write_unreachable(GuestSink &sink, const ReplyEnds &e, const EchoRequest &r,
                       Unreachable why, uint16_t ip_id) {
    // IPv6: 1280 (minimum MTU) - 40 - 8 bytes quoted at most.
    constexpr size_t kQuote6 = 1280 - kIp6Len - kIcmpLen;
    uint8_t f[kEthLen + kIp6Len + kIcmpLen + kQuote6];
    ReplyEnds to = e;
    std::memcpy(to.guest_mac, r.src_mac, 6);
    std::memcpy(to.guest, r.src, 16);
    const size_t ip_len = r.v6 ? kIp6Len : kIp4Len;
    const size_t quote = r.v6 ? std::min(r.packet.size(), kQuote6)
                              : r.packet.size() - r.message.size() + kIcmpLen;
    uint8_t *icmp = f + kEthLen + ip_len;
    icmp[0] = r.v6 ? 1 : 3;
    icmp[1] = why == Unreachable::Net ? 0 : (r.v6 ? 3 : 1);
    std::memset(icmp + 2, 0, 6); // checksum, unused
    std::memcpy(icmp + kIcmpLen, r.packet.data(), quote);
    const size_t len = kIcmpLen + quote;
    uint64_t sum = csum_add(0, icmp, len);
    if (r.v6) {
        sum += pseudo6(to.remote, to.guest, len);
        put_be16(icmp + 2, uint16_t(~csum_fold(sum)));
        put_eth(f, to, kIpv6);
        uint8_t *ip = f + kEthLen;
        ip[0] = 0x60;
        ip[1] = ip[2] = ip[3] = 0;
        put_be16(ip + 4, uint16_t(len));
        ip[6] = kProtoIcmp6;
        ip[7] = kTtl;
        std::memcpy(ip + 8, to.remote, 16);
        std::memcpy(ip + 24, to.guest, 16);
    } else {
        put_be16(icmp + 2, uint16_t(~csum_fold(sum)));
        put_eth(f, to, kIpv4);
        put_ip4(f + kEthLen, to, kIp4Len + len, ip_id, 0);
    }
    sink.write_frame(VnetHdr{}, {f, kEthLen + ip_len + len}, {});
}

} // namespace rknp::icmp
