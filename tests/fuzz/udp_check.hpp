// SPDX-License-Identifier: Apache-2.0

// The check of every frame the UDP fast path (plugin/datapath/udp/) writes
// to the guest, shared by the `udp` and `frames` fuzz targets: a GuestSink
// that parses each frame as the guest's kernel would and aborts
// (fuzz::require) when it is not what the guest may receive:
// - Ethernet + IPv4 (20-byte header, valid header checksum) or IPv6, the
//   IP length exactly the frame's, the frame within 14 + MTU, never GSO;
// - a whole UDP datagram: NEEDS_CSUM at the UDP checksum, hdr_len the
//   headers; completing it gives a valid UDP checksum; the UDP length is
//   the IP payload's;
// - fragments (IPv4 offset/MF, IPv6 fragment header): checksum complete
//   (no vnet flags), one datagram's fragments back to back, in order, same
//   id and addresses, all but the last a multiple of 8 bytes; reassembled,
//   a valid UDP datagram with its checksum;
// - ICMP (IPv4) / ICMPv6 errors: checksum complete and valid, an error
//   type, quoting a UDP datagram from the frame's destination to its
//   source (the guest's datagram that failed), or, from the virtual
//   gateway (10.0.2.2, fd00::2), a destination unreachable about a flow
//   that could not connect.
// Optional hooks: known() (the datagram's or quote's 4-tuple is a flow the
// guest opened) and payload_ok() (the bytes are the host's).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <span>
#include <vector>

#include "datapath/checksum.hpp"
#include "datapath/flows/endpoints.hpp"
#include "datapath/guest_sink.hpp"
#include "datapath/offload.hpp"
#include "fuzz_input.hpp"

namespace fuzz::udpcheck {

using namespace rknp;

// A guest-bound datagram's 4-tuple (IPv4 addresses IPv4-mapped).
struct FlowKey {
    bool v6 = false;
    uint8_t guest[16]{}, remote[16]{};
    uint16_t guest_port = 0, remote_port = 0;
    bool operator==(const FlowKey &o) const {
        return v6 == o.v6 && guest_port == o.guest_port && remote_port == o.remote_port &&
               std::memcmp(guest, o.guest, 16) == 0 && std::memcmp(remote, o.remote, 16) == 0;
    }
};

// The one's complement sum of a pseudo-header (RFC 768 / RFC 8200 8.1).
inline uint64_t pseudo_header(bool v6, const uint8_t src[16], const uint8_t dst[16],
                              size_t l4_len, uint8_t proto) {
    if (v6) {
        uint8_t tail[8] = {0, 0, uint8_t(l4_len >> 8), uint8_t(l4_len), 0, 0, 0, proto};
        return csum_add(csum_add(csum_add(0, src, 16), dst, 16), tail, 8);
    }
    uint8_t tail[4] = {0, proto, uint8_t(l4_len >> 8), uint8_t(l4_len)};
    return csum_add(csum_add(csum_add(0, src + 12, 4), dst + 12, 4), tail, 4);
}

class GuestCheck final : public GuestSink {
public:
    uint32_t mtu = 65520;
    std::function<bool(const FlowKey &)> known;
    std::function<bool(std::span<const uint8_t>)> payload_ok;
    bool trace = false; // a line per frame on stderr
    // Counted as the fast path counts them (FastPathStats).
    uint64_t frames = 0, datagrams = 0, fragmented = 0, icmp = 0;

    void write_frame(const VnetHdr &h, std::span<const uint8_t> head,
                     std::span<const uint8_t> rest) override {
        ++frames;
        f_.assign(head.begin(), head.end());
        f_.insert(f_.end(), rest.begin(), rest.end());
        check(h);
    }

    // Between calls into the fast path: no datagram half sent.
    void require_idle() const {
        fuzz::require(!frag_.active, "a datagram's fragments stop before the last");
    }

private:
    struct Ip {
        bool v6 = false;
        uint8_t src[16]{}, dst[16]{};
        uint8_t proto = 0;
        size_t hdr = 0;         // IP header(s) before the L4 bytes
        const uint8_t *l4 = nullptr;
        size_t l4_len = 0;
        bool fragment = false, more = false;
        size_t offset = 0;
        uint32_t id = 0;
    };

    Ip parse_ip() {
        Ip ip;
        const uint8_t *p = f_.data() + kEthLen;
        const size_t avail = f_.size() - kEthLen;
        if (be16(f_.data() + 12) == 0x0800) {
            fuzz::require(avail >= kIp4Len && p[0] == 0x45, "IPv4 header");
            fuzz::require(be16(p + 2) == avail, "IPv4 total length is not the frame's");
            fuzz::require(csum_fold(csum_add(0, p, kIp4Len)) == 0xffff, "IPv4 header checksum");
            map_v4(p + 12, ip.src);
            map_v4(p + 16, ip.dst);
            ip.proto = p[9];
            const uint16_t fo = be16(p + 6);
            fuzz::require((fo & 0x8000) == 0, "IPv4 reserved flag");
            ip.offset = size_t(fo & 0x1fff) * 8;
            ip.more = (fo & 0x2000) != 0;
            ip.fragment = ip.more || ip.offset != 0;
            ip.id = be16(p + 4);
            ip.hdr = kIp4Len;
        } else {
            fuzz::require(be16(f_.data() + 12) == 0x86dd, "ethertype");
            ip.v6 = true;
            fuzz::require(avail >= kIp6Len && (p[0] >> 4) == 6, "IPv6 header");
            fuzz::require(size_t(be16(p + 4)) + kIp6Len == avail,
                          "IPv6 payload length is not the frame's");
            std::memcpy(ip.src, p + 8, 16);
            std::memcpy(ip.dst, p + 24, 16);
            ip.proto = p[6];
            ip.hdr = kIp6Len;
            if (ip.proto == 44) {
                fuzz::require(avail >= kIp6Len + 8, "IPv6 fragment header cut");
                const uint8_t *fh = p + kIp6Len;
                ip.proto = fh[0];
                fuzz::require(fh[1] == 0 && (be16(fh + 2) & 6) == 0,
                              "IPv6 fragment header reserved bits");
                ip.offset = be16(fh + 2) & ~7u;
                ip.more = (be16(fh + 2) & 1) != 0;
                ip.id = be32(fh + 4);
                ip.fragment = true;
                ip.hdr += 8;
            }
        }
        ip.l4 = p + ip.hdr;
        ip.l4_len = avail - ip.hdr;
        return ip;
    }

    void check(const VnetHdr &h) {
        fuzz::require(f_.size() >= kEthLen, "frame shorter than Ethernet");
        fuzz::require(f_.size() <= kEthLen + mtu, "frame over the MTU");
        fuzz::require(h.gso_type == 0 && h.gso_size == 0, "GSO on a UDP fast path frame");
        const Ip ip = parse_ip();
        if (trace)
            std::fprintf(stderr, "  <- %s proto %u len %zu%s%s type %u\n", ip.v6 ? "v6" : "v4",
                         ip.proto, f_.size(), ip.fragment ? " fragment" : "",
                         ip.more ? " more" : "", ip.l4_len > 0 ? ip.l4[0] : 0);
        if (ip.fragment) {
            fragment(h, ip);
            return;
        }
        fuzz::require(!frag_.active, "a frame between one datagram's fragments");
        if (ip.proto == kProtoUdp) {
            whole(h, ip);
        } else if (ip.proto == (ip.v6 ? 58 : 1)) {
            icmp_error(h, ip);
        } else {
            fuzz::fail("UDP fast path frame of another protocol");
        }
    }

    void whole(const VnetHdr &h, const Ip &ip) {
        const size_t l4_off = kEthLen + ip.hdr;
        fuzz::require(h.flags == kVnetNeedsCsum && h.csum_start == l4_off &&
                          h.csum_offset == 6 && h.hdr_len == l4_off + 8,
                      "UDP vnet header offsets");
        fuzz::require(ip.l4_len >= 8 && be16(ip.l4 + 4) == ip.l4_len,
                      "UDP length is not the IP payload's");
        std::vector<uint8_t> done(f_);
        fuzz::require(complete_checksum(done, h), "UDP partial checksum offsets");
        const uint8_t *udp = done.data() + l4_off;
        uint64_t sum = pseudo_header(ip.v6, ip.src, ip.dst, ip.l4_len, kProtoUdp);
        fuzz::require(csum_fold(csum_add(sum, udp, ip.l4_len)) == 0xffff,
                      "UDP checksum after completion");
        datagram(ip, {udp, ip.l4_len});
    }

    void fragment(const VnetHdr &h, const Ip &ip) {
        fuzz::require(h.flags == 0, "a fragment with a partial checksum");
        fuzz::require(ip.proto == kProtoUdp, "fragment of another protocol");
        if (ip.offset == 0) {
            fuzz::require(!frag_.active, "a datagram's fragments stop before the last");
            frag_.active = true;
            frag_.ip = ip;
            frag_.data.clear();
        } else {
            fuzz::require(frag_.active && frag_.ip.v6 == ip.v6 && frag_.ip.id == ip.id &&
                              !std::memcmp(frag_.ip.src, ip.src, 16) &&
                              !std::memcmp(frag_.ip.dst, ip.dst, 16),
                          "fragment of another datagram");
            fuzz::require(ip.offset == frag_.data.size(), "fragment offset out of order");
        }
        if (ip.more)
            fuzz::require(ip.l4_len > 0 && ip.l4_len % 8 == 0,
                          "non-final fragment not a multiple of 8");
        frag_.data.insert(frag_.data.end(), ip.l4, ip.l4 + ip.l4_len);
        if (ip.more) return;
        frag_.active = false;
        const std::vector<uint8_t> &udp = frag_.data;
        fuzz::require(udp.size() >= 8 && be16(udp.data() + 4) == udp.size(),
                      "reassembled UDP length");
        fuzz::require(udp.size() + (ip.v6 ? kIp6Len : kIp4Len) > mtu,
                      "a datagram that fits the MTU sent as fragments");
        fuzz::require(be16(udp.data() + 6) != 0, "fragmented datagram without checksum");
        uint64_t sum = pseudo_header(ip.v6, ip.src, ip.dst, udp.size(), kProtoUdp);
        fuzz::require(csum_fold(csum_add(sum, udp.data(), udp.size())) == 0xffff,
                      "UDP checksum of a reassembled datagram");
        ++fragmented;
        datagram(frag_.ip, udp);
    }

    void datagram(const Ip &ip, std::span<const uint8_t> udp) {
        ++datagrams;
        FlowKey k;
        k.v6 = ip.v6;
        std::memcpy(k.guest, ip.dst, 16);
        std::memcpy(k.remote, ip.src, 16);
        k.remote_port = be16(udp.data());
        k.guest_port = be16(udp.data() + 2);
        if (known) fuzz::require(known(k), "a datagram for a 4-tuple the guest never used");
        if (payload_ok)
            fuzz::require(payload_ok(udp.subspan(8)), "guest-bound bytes are not the host's");
    }

    void icmp_error(const VnetHdr &h, const Ip &ip) {
        fuzz::require(h.flags == 0, "an ICMP error with a partial checksum");
        const size_t inner_ip = ip.v6 ? kIp6Len : kIp4Len;
        fuzz::require(ip.l4_len >= 8 + inner_ip + 8, "ICMP error too short to quote");
        uint64_t sum = csum_add(0, ip.l4, ip.l4_len);
        if (ip.v6) sum += pseudo_header(true, ip.src, ip.dst, ip.l4_len, 58);
        fuzz::require(csum_fold(sum) == 0xffff, "ICMP checksum");
        const uint8_t type = ip.l4[0];
        if (ip.v6)
            fuzz::require(type >= 1 && type <= 4, "ICMPv6 type is not an error");
        else
            fuzz::require(type == 3 || type == 4 || type == 5 || type == 11 || type == 12,
                          "ICMP type is not an error");
        const uint8_t *in = ip.l4 + 8;
        FlowKey k;
        k.v6 = ip.v6;
        if (ip.v6) {
            fuzz::require((in[0] >> 4) == 6 && in[6] == kProtoUdp, "quoted IPv6 header");
            std::memcpy(k.guest, in + 8, 16);
            std::memcpy(k.remote, in + 24, 16);
        } else {
            fuzz::require(in[0] == 0x45 && in[9] == kProtoUdp, "quoted IPv4 header");
            fuzz::require(csum_fold(csum_add(0, in, kIp4Len)) == 0xffff,
                          "quoted IPv4 header checksum");
            map_v4(in + 12, k.guest);
            map_v4(in + 16, k.remote);
        }
        // The parent's own answer comes from the gateway, as a router's.
        static const uint8_t gw4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 2, 2};
        static const uint8_t gw6[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
        const bool from_gateway =
            type == (ip.v6 ? 1 : 3) && !std::memcmp(ip.src, ip.v6 ? gw6 : gw4, 16);
        fuzz::require(!std::memcmp(k.guest, ip.dst, 16) &&
                          (from_gateway || !std::memcmp(k.remote, ip.src, 16)),
                      "ICMP error quotes a datagram of other addresses");
        k.guest_port = be16(in + inner_ip);
        k.remote_port = be16(in + inner_ip + 2);
        ++icmp;
        if (known) fuzz::require(known(k), "an ICMP error about a 4-tuple the guest never used");
    }

    std::vector<uint8_t> f_;
    struct {
        bool active = false;
        Ip ip;
        std::vector<uint8_t> data;
    } frag_;
};

} // namespace fuzz::udpcheck
