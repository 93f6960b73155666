// SPDX-License-Identifier: Apache-2.0

// Parsing of guest UDP frames; building of guest-bound datagrams, their
// fragments and ICMP errors.
#include "datapath/udp/frame.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "datapath/checksum.hpp"
#include "datapath/flows/ip_packet.hpp"

namespace rknp::udp {

namespace {

constexpr uint8_t kProtoIcmp = 1, kProtoFrag6 = 44, kProtoIcmp6 = 58;
constexpr uint8_t kTtl = 64; // libslirp's IPDEFTTL

void put_be32(uint8_t *p, uint32_t v) {
    put_be16(p, uint16_t(v >> 16));
    put_be16(p + 2, uint16_t(v));
}

// Ethernet and IP headers of a frame from src to dst (16-byte addresses,
// IPv4-mapped unless v6) carrying ip_payload bytes of protocol proto;
// frag4 is the IPv4 flags/offset field. Returns the offset after them.
size_t put_eth_ip(uint8_t *h, const Endpoints &ep, const uint8_t *src,
                  const uint8_t *dst, size_t ip_payload, uint8_t proto,
                  uint16_t id4, uint16_t frag4) {
    std::memcpy(h, ep.guest_mac, 6);
    std::memcpy(h + 6, ep.gw_mac, 6);
    uint8_t *ip = h + kEthLen;
    if (!ep.v6) {
        put_be16(h + 12, 0x0800);
        ip[0] = 0x45;
        ip[1] = 0;
        put_be16(ip + 2, uint16_t(kIp4Len + ip_payload));
        put_be16(ip + 4, id4);
        put_be16(ip + 6, frag4);
        ip[8] = kTtl;
        ip[9] = proto;
        std::memcpy(ip + 12, src + 12, 4);
        std::memcpy(ip + 16, dst + 12, 4);
        set_ipv4_checksum(ip, kIp4Len);
        return kEthLen + kIp4Len;
    }
    put_be16(h + 12, 0x86dd);
    ip[0] = 0x60;
    ip[1] = ip[2] = ip[3] = 0;
    put_be16(ip + 4, uint16_t(ip_payload));
    ip[6] = proto;
    ip[7] = kTtl;
    std::memcpy(ip + 8, src, 16);
    std::memcpy(ip + 24, dst, 16);
    return kEthLen + kIp6Len;
}

void put_udp(uint8_t *u, uint16_t sport, uint16_t dport, size_t udp_len,
             uint16_t csum) {
    put_be16(u, sport);
    put_be16(u + 2, dport);
    put_be16(u + 4, uint16_t(udp_len));
    put_be16(u + 6, csum);
}

// The pseudo-header sum (RFC 768, RFC 8200 8.1) of l4_len bytes of proto
// from src to dst.
uint64_t pseudo_sum(bool v6, const uint8_t *src, const uint8_t *dst,
                    size_t l4_len, uint8_t proto) {
    if (v6) {
        uint8_t tail[8] = {0, 0, uint8_t(l4_len >> 8), uint8_t(l4_len), 0, 0, 0, proto};
        return csum_add(csum_add(csum_add(0, src, 16), dst, 16), tail, 8);
    }
    uint8_t tail[4] = {0, proto, uint8_t(l4_len >> 8), uint8_t(l4_len)};
    return csum_add(csum_add(csum_add(0, src + 12, 4), dst + 12, 4), tail, 4);
}

} // namespace

Parse parse_datagram(std::span<const uint8_t> frame, Datagram &d) {
    IpPacket ip;
    if (const Parse v = parse_ip(frame, kProtoUdp, kProtoUdp, ip); v != Parse::Ok)
        return v; // NotMine or Malformed, as the IP layer says
    const uint8_t *l4 = ip.l4.data();
    if (ip.l4.size() < kUdpLen) return Parse::Malformed;
    const size_t udp_len = be16(l4 + 4);
    if (udp_len < kUdpLen || udp_len > ip.l4.size()) return Parse::Malformed;
    // A partial checksum (the pseudo-header sum) is never zero: one's
    // complement sums of non-zero data fold to 0xffff, not 0.
    if (ip.v6 && be16(l4 + 6) == 0) return Parse::Malformed;
    d.v6 = ip.v6;
    std::memcpy(d.src, ip.src, 16);
    std::memcpy(d.dst, ip.dst, 16);
    std::memcpy(d.src_mac, frame.data() + 6, 6);
    d.sport = be16(l4);
    d.dport = be16(l4 + 2);
    d.payload = {l4 + kUdpLen, udp_len - kUdpLen};
    return Parse::Ok;
}

bool fits_mtu(const Endpoints &ep, size_t payload_len, uint32_t mtu) {
    return (ep.v6 ? kIp6Len : kIp4Len) + kUdpLen + payload_len <= mtu;
}

size_t build_datagram(uint8_t *hdr, VnetHdr &vnet, const Endpoints &ep,
                      size_t payload_len, uint16_t ip_id) {
    const size_t udp_len = kUdpLen + payload_len;
    const size_t l4 = put_eth_ip(hdr, ep, ep.remote, ep.guest, udp_len, kProtoUdp, ip_id, 0);
    put_udp(hdr + l4, ep.remote_port, ep.guest_port, udp_len, 0);
    vnet = partial_l4_checksum(hdr, kEthLen, l4, l4 + kUdpLen, udp_len, ep.v6, kProtoUdp);
    return l4 + kUdpLen;
}

bool fits_gso_frame(const Endpoints &ep, size_t payload_len) {
    return (ep.v6 ? 0 : kIp4Len) + kUdpLen + payload_len <= 0xffff;
}

size_t build_gso_datagrams(uint8_t *hdr, VnetHdr &vnet, const Endpoints &ep,
                           size_t payload_len, size_t seg, uint16_t ip_id) {
    // The UDP header and the partial checksum cover the whole payload:
    // the guest's kernel rewrites both for each datagram it cuts.
    const size_t len = build_datagram(hdr, vnet, ep, payload_len, ip_id);
    vnet.gso_type = kVnetGsoUdpL4;
    vnet.gso_size = uint16_t(seg);
    return len;
}

Fragments::Fragments(const Endpoints &ep, std::span<const uint8_t> payload,
                     uint32_t mtu, uint32_t id)
    : ep_(ep), payload_(payload), id_(id) {
    const size_t ip_hdr = ep.v6 ? kIp6Len + kIp6FragLen : kIp4Len;
    step_ = mtu > ip_hdr + 8 ? (mtu - ip_hdr) / 8 * 8 : 8;
    const size_t udp_len = kUdpLen + payload.size();
    uint8_t udp[kUdpLen];
    put_udp(udp, ep.remote_port, ep.guest_port, udp_len, 0);
    uint64_t sum = pseudo_sum(ep.v6, ep.remote, ep.guest, udp_len, kProtoUdp);
    sum = csum_add(csum_add(sum, udp, kUdpLen), payload.data(), payload.size());
    csum_ = uint16_t(~csum_fold(sum));
    if (csum_ == 0) csum_ = 0xffff; // 0 means "no checksum"
}

bool Fragments::next(uint8_t *hdr, size_t &hdr_len, std::span<const uint8_t> &part) {
    const size_t total = kUdpLen + payload_.size();
    if (done_ >= total) return false;
    const size_t n = std::min(step_, total - done_);
    const bool more = done_ + n < total;
    size_t off;
    if (!ep_.v6) {
        off = put_eth_ip(hdr, ep_, ep_.remote, ep_.guest, n, kProtoUdp, uint16_t(id_),
                         uint16_t(done_ / 8 | (more ? 0x2000 : 0)));
    } else {
        off = put_eth_ip(hdr, ep_, ep_.remote, ep_.guest, kIp6FragLen + n, kProtoFrag6, 0, 0);
        hdr[off] = kProtoUdp;
        hdr[off + 1] = 0;
        put_be16(hdr + off + 2, uint16_t(done_ | (more ? 1 : 0))); // offset << 3 | M
        put_be32(hdr + off + 4, id_);
        off += kIp6FragLen;
    }
    if (done_ == 0) {
        put_udp(hdr + off, ep_.remote_port, ep_.guest_port, total, csum_);
        off += kUdpLen;
        part = payload_.subspan(0, n - kUdpLen);
    } else {
        part = payload_.subspan(done_ - kUdpLen, n);
    }
    done_ += n;
    hdr_len = off;
    return true;
}

std::optional<IcmpError> unreachable_for(int err, bool v6) {
    // Destination unreachable: ICMP type 3, ICMPv6 type 1.
    const uint8_t type = v6 ? 1 : 3;
    switch (err) {
    case ENETUNREACH:
        return IcmpError{type, 0, 0};
    case EHOSTUNREACH:
    case EHOSTDOWN:
    case ENONET:
        return IcmpError{type, uint8_t(v6 ? 3 : 1), 0};
    case ECONNREFUSED:
        return IcmpError{type, uint8_t(v6 ? 4 : 3), 0};
    case EACCES:
    case EPERM:
        return IcmpError{type, uint8_t(v6 ? 1 : 13), 0};
    default:
        return std::nullopt;
    }
}

size_t build_icmp_error(uint8_t *out, const Endpoints &outer, const Endpoints &ep,
                        const IcmpError &e, std::span<const uint8_t> quote,
                        size_t payload_len, uint16_t ip_id, uint32_t mtu) {
    const size_t inner_ip = ep.v6 ? kIp6Len : kIp4Len;
    // The IP packet within the guest's MTU (IPv4's may be 68: room for 12
    // bytes of payload after the quoted headers).
    const size_t headers = inner_ip + 8 + inner_ip + kUdpLen;
    if (mtu < headers) return 0;
    quote = quote.first(std::min({quote.size(), kIcmpQuote, size_t(mtu) - headers}));
    // The quote is of a datagram at least as long as what it holds.
    payload_len = std::max(payload_len, quote.size());
    const size_t icmp_len = 8 + inner_ip + kUdpLen + quote.size();
    const uint8_t proto = ep.v6 ? kProtoIcmp6 : kProtoIcmp;
    const size_t l4 =
        put_eth_ip(out, outer, outer.remote, outer.guest, icmp_len, proto, ip_id, 0);
    uint8_t *icmp = out + l4;
    icmp[0] = e.type;
    icmp[1] = e.code;
    put_be16(icmp + 2, 0);
    // Bytes 4-7: the next-hop MTU of IPv4's "fragmentation needed" (low
    // half) and of ICMPv6's "packet too big" (all four), else zero.
    put_be32(icmp + 4, ep.v6 ? (e.type == 2 ? e.info : 0)
                             : (e.type == 3 && e.code == 4 ? e.info & 0xffff : 0));
    // The quote: the guest's datagram as it left the guest, headers first.
    uint8_t *inner = icmp + 8;
    const size_t udp_len = kUdpLen + payload_len;
    if (!ep.v6) {
        inner[0] = 0x45;
        inner[1] = 0;
        put_be16(inner + 2, uint16_t(std::min<size_t>(kIp4Len + udp_len, 0xffff)));
        put_be32(inner + 4, 0);
        inner[8] = kTtl;
        inner[9] = kProtoUdp;
        std::memcpy(inner + 12, ep.guest + 12, 4);
        std::memcpy(inner + 16, ep.remote + 12, 4);
        set_ipv4_checksum(inner, kIp4Len);
    } else {
        inner[0] = 0x60;
        inner[1] = inner[2] = inner[3] = 0;
        put_be16(inner + 4, uint16_t(std::min<size_t>(udp_len, 0xffff)));
        inner[6] = kProtoUdp;
        inner[7] = kTtl;
        std::memcpy(inner + 8, ep.guest, 16);
        std::memcpy(inner + 24, ep.remote, 16);
    }
    put_udp(inner + inner_ip, ep.guest_port, ep.remote_port,
            std::min<size_t>(udp_len, 0xffff), 0);
    if (!quote.empty()) std::memcpy(inner + inner_ip + kUdpLen, quote.data(), quote.size());
    uint64_t sum = csum_add(0, icmp, icmp_len);
    if (ep.v6) sum += pseudo_sum(true, outer.remote, outer.guest, icmp_len, kProtoIcmp6);
    put_be16(icmp + 2, uint16_t(~csum_fold(sum)));
    return l4 + icmp_len;
}

bool parse_port_unreachable(std::span<const uint8_t> frame, Datagram &q) {
    IpPacket ip;
    if (parse_ip(frame, kProtoIcmp, kProtoIcmp6, ip) != Parse::Ok) return false;
    const std::span<const uint8_t> icmp = ip.l4;
    if (icmp.size() < 8) return false;
    if (ip.v6 ? (icmp[0] != 1 || icmp[1] != 4) : (icmp[0] != 3 || icmp[1] != 3)) return false;
    const uint8_t *in = icmp.data() + 8;
    const size_t left = icmp.size() - 8;
    size_t inner;
    if (ip.v6) {
        inner = kIp6Len;
        if (left < inner + kUdpLen || (in[0] >> 4) != 6 || in[6] != kProtoUdp) return false;
        std::memcpy(q.src, in + 8, 16);
        std::memcpy(q.dst, in + 24, 16);
    } else {
        inner = size_t(in[0] & 0x0f) * 4;
        if ((in[0] >> 4) != 4 || inner < kIp4Len || left < inner + kUdpLen ||
            in[9] != kProtoUdp)
            return false;
        map_v4(in + 12, q.src);
        map_v4(in + 16, q.dst);
    }
    // Only the address the datagram went to may say its port is closed.
    if (std::memcmp(ip.src, q.dst, 16) != 0) return false;
    q.v6 = ip.v6;
    std::memcpy(q.src_mac, frame.data() + 6, 6);
    q.sport = be16(in + inner);
    q.dport = be16(in + inner + 2);
    q.payload = {};
    return true;
}

} // namespace rknp::udp
