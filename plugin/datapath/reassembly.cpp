// SPDX-License-Identifier: Apache-2.0

// IPv4 reassembly of guest fragments, strict on overlaps and bounded.
#include "datapath/reassembly.hpp"

#include <algorithm>
#include <cstring>

#include "datapath/checksum.hpp"

namespace rknp {

namespace {

constexpr size_t kEthLen = 14, kIpLen = 20;
constexpr uint16_t kDontFragment = 0x4000, kMoreFragments = 0x2000,
                   kOffsetMask = 0x1fff;

} // namespace

bool is_ipv4_fragment(std::span<const uint8_t> f) {
    return f.size() >= kEthLen + kIpLen && be16(f.data() + 12) == 0x0800 &&
           (be16(f.data() + kEthLen + 6) & (kMoreFragments | kOffsetMask)) != 0;
}

Ipv4Reassembler::Outcome Ipv4Reassembler::add(std::span<const uint8_t> frame,
                                              int64_t now_ms) {
    Outcome o;
    o.dropped = expire(now_ms);
    // Plain headers with a valid checksum only: the header rebuilt from them
    // gets a fresh checksum, so a corrupt one must not get through here.
    const uint8_t *ip = frame.data() + kEthLen;
    size_t ip_total = is_ipv4_fragment(frame) ? be16(ip + 2) : 0;
    if (ip_total <= kIpLen || kEthLen + ip_total > frame.size() ||
        ip[0] != 0x45 || csum_fold(csum_add(0, ip, kIpLen)) != 0xffff) {
        ++o.dropped;
        return o;
    }
    uint16_t flags = be16(ip + 6);
    size_t off = size_t(flags & kOffsetMask) * 8, len = ip_total - kIpLen;
    Key key{be32(ip + 12), be32(ip + 16), be16(ip + 4), ip[9]};

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
    if (!merge(*it, frame, off, len, (flags & kMoreFragments) != 0)) {
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

bool Ipv4Reassembler::merge(Datagram &d, std::span<const uint8_t> frame,
                            size_t off, size_t len, bool more) {
    size_t end = off + len;
    // Only the last fragment may end inside an 8-byte block, and no
    // fragment may reach past the last one.
    if (end > kMaxPayload || (more && len % 8 != 0) ||
        (d.have_last && end > d.total))
        return false;
    if (!more) {
        if (d.have_last ? end != d.total : end < d.payload.size()) return false;
        d.have_last = true;
        d.total = end;
    }
    const uint8_t *data = frame.data() + kEthLen + kIpLen;
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
    if (off == 0) d.head.assign(frame.begin(), frame.begin() + kEthLen + kIpLen);
    return true;
}

void Ipv4Reassembler::build(const Datagram &d) {
    out_.assign(d.head.begin(), d.head.end());
    out_.insert(out_.end(), d.payload.begin(), d.payload.begin() + long(d.total));
    uint8_t *ip = out_.data() + kEthLen;
    put_be16(ip + 2, uint16_t(kIpLen + d.total));
    put_be16(ip + 6, be16(ip + 6) & kDontFragment);
    put_be16(ip + 10, 0);
    put_be16(ip + 10, uint16_t(~csum_fold(csum_add(0, ip, kIpLen))));
}

uint32_t Ipv4Reassembler::expire(int64_t now_ms) {
    uint32_t dropped = 0;
    std::erase_if(pending_, [&](const Datagram &d) {
        if (now_ms - d.started_ms < kTimeoutMs) return false;
        dropped += d.fragments;
        return true;
    });
    return dropped;
}

} // namespace rknp
