// SPDX-License-Identifier: Apache-2.0

// IPv4 and IPv6 reassembly of guest fragments, strict on overlaps and bounded.
#include "datapath/reassembly.hpp"

#include <algorithm>
#include <cstring>

#include "datapath/checksum.hpp"

namespace rknp {

namespace {

constexpr size_t kEthLen = 14, kIpLen = 20, kIp6Len = 40, kFragHdrLen = 8;
constexpr uint16_t kDontFragment = 0x4000, kMoreFragments = 0x2000,
                   kOffsetMask = 0x1fff;
constexpr uint8_t kNextFragment = 44;

} // namespace

bool is_ipv4_fragment(std::span<const uint8_t> f) {
    return f.size() >= kEthLen + kIpLen && be16(f.data() + 12) == 0x0800 &&
           (be16(f.data() + kEthLen + 6) & (kMoreFragments | kOffsetMask)) != 0;
}

bool is_ipv6_fragment(std::span<const uint8_t> f) {
    return f.size() >= kEthLen + kIp6Len + kFragHdrLen && be16(f.data() + 12) == 0x86dd &&
           f[kEthLen + 6] == kNextFragment;
}

bool IpReassembler::parse(std::span<const uint8_t> frame, Piece &p) {
    const uint8_t *ip = frame.data() + kEthLen;
    if (is_ipv4_fragment(frame)) {
        // Plain headers with a valid checksum only: the header rebuilt from
        // them gets a fresh checksum, so a corrupt one must not get through.
        const size_t total = be16(ip + 2);
        if (total <= kIpLen || kEthLen + total > frame.size() || ip[0] != 0x45 ||
            csum_fold(csum_add(0, ip, kIpLen)) != 0xffff)
            return false;
        const uint16_t flags = be16(ip + 6);
        p.key.v6 = false;
        std::memcpy(p.key.src, ip + 12, 4);
        std::memcpy(p.key.dst, ip + 16, 4);
        p.key.id = be16(ip + 4);
        p.key.proto = ip[9];
        p.head_len = kEthLen + kIpLen;
        p.off = size_t(flags & kOffsetMask) * 8;
        p.len = total - kIpLen;
        p.more = (flags & kMoreFragments) != 0;
        p.max_payload = kMaxPayload4;
    } else if (is_ipv6_fragment(frame)) {
        const size_t payload = be16(ip + 4);
        if ((ip[0] >> 4) != 6 || payload <= kFragHdrLen ||
            kEthLen + kIp6Len + payload > frame.size())
            return false;
        const uint8_t *fh = ip + kIp6Len;
        const uint16_t offset_field = be16(fh + 2);
        p.key.v6 = true;
        std::memcpy(p.key.src, ip + 8, 16);
        std::memcpy(p.key.dst, ip + 24, 16);
        p.key.id = be32(fh + 4);
        p.key.proto = fh[0];
        // A Fragment header behind a Fragment header is not a datagram.
        if (p.key.proto == kNextFragment) return false;
        p.head_len = kEthLen + kIp6Len;
        p.off = offset_field & 0xfff8;
        p.len = payload - kFragHdrLen;
        p.more = (offset_field & 1) != 0;
        p.max_payload = kMaxPayload6;
    } else {
        return false;
    }
    p.data = ip + (p.head_len - kEthLen) + (p.key.v6 ? kFragHdrLen : 0);
    return true;
}

IpReassembler::Outcome IpReassembler::add(std::span<const uint8_t> frame, int64_t now_ms) {
    Outcome o;
    o.dropped = expire(now_ms);
    Piece piece;
    if (!parse(frame, piece)) {
        ++o.dropped;
        return o;
    }
    const Key &key = piece.key;
    auto it = std::find_if(pending_.begin(), pending_.end(),
                           [&](const Datagram &d) { return d.key == key; });
    if (it == pending_.end()) {
        if (pending_.size() == kMaxPending) { // the oldest makes room
            o.dropped += pending_.front().fragments;
            pending_.erase(pending_.begin());
        }
        it = pending_.insert(pending_.end(), Datagram{});
        it->key = key;
        it->started_ms = now_ms;
    }
    if (!merge(*it, frame, piece)) {
        o.dropped += it->fragments + 1;
        pending_.erase(it);
        return o;
    }
    ++it->fragments;
    if (it->head.empty() || !it->have_last ||
        it->blocks != (it->total + 7) / 8)
        return o;
    build(*it);
    o.datagram = out_;
    o.fragments = it->fragments;
    pending_.erase(it);
    return o;
}

bool IpReassembler::merge(Datagram &d, std::span<const uint8_t> frame, const Piece &p) {
    const size_t off = p.off, len = p.len, end = off + len;
    const bool more = p.more;
    // Only the last fragment may end inside an 8-byte block, and no
    // fragment may reach past the last one.
    if (end > p.max_payload || (more && len % 8 != 0) ||
        (d.have_last && end > d.total))
        return false;
    if (!more) {
        if (d.have_last ? end != d.total : end < d.payload.size()) return false;
        d.have_last = true;
        d.total = end;
    }
    const uint8_t *data = p.data;
    if (d.payload.size() < end) d.payload.resize(end);
    // Bytes received before must come again unchanged (a duplicate);
    // different ones are an overlap attack or corruption.
    for (size_t b = off / 8; b * 8 < end; ++b) {
        size_t from = b * 8, to = std::min(from + 8, end);
        if (d.have[b] &&
            std::memcmp(d.payload.data() + from, data + (from - off), to - from))
            return false;
    }
    std::memcpy(d.payload.data() + off, data, len);
    for (size_t b = off / 8; b * 8 < end; ++b) {
        if (!d.have[b]) ++d.blocks;
        d.have[b] = true;
    }
    if (off == 0) d.head.assign(frame.begin(), frame.begin() + long(p.head_len));
    return true;
}

void IpReassembler::build(const Datagram &d) {
    out_.assign(d.head.begin(), d.head.end());
    out_.insert(out_.end(), d.payload.begin(), d.payload.begin() + long(d.total));
    uint8_t *ip = out_.data() + kEthLen;
    if (d.key.v6) { // the Fragment header goes; its next header takes its place
        put_be16(ip + 4, uint16_t(d.total));
        ip[6] = d.key.proto;
        return;
    }
    put_be16(ip + 2, uint16_t(kIpLen + d.total));
    put_be16(ip + 6, be16(ip + 6) & kDontFragment);
    set_ipv4_checksum(ip, kIpLen);
}

uint32_t IpReassembler::expire(int64_t now_ms) {
    uint32_t dropped = 0;
    std::erase_if(pending_, [&](const Datagram &d) {
        if (now_ms - d.started_ms < kTimeoutMs) return false;
        dropped += d.fragments;
        return true;
    });
    return dropped;
}

} // namespace rknp
