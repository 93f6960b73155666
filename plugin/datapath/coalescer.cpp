// SPDX-License-Identifier: Apache-2.0

// Merging of guest-bound TCP segments into GSO frames.
#include "datapath/coalescer.hpp"

#include <cstring>

#include "datapath/checksum.hpp"

namespace rknp {

namespace {

constexpr size_t kEthLen = 14;
constexpr size_t kMaxMerged = 65535 - 60; // IP total length limit, slack
constexpr uint8_t kTcpAck = 0x10, kTcpPsh = 0x08;

} // namespace

struct Coalescer::Flow {
    size_t l3_off, hdr_len;
    bool ipv6;
    uint32_t seq, ack;
    uint16_t payload;
    uint8_t flags;
};

Coalescer::Coalescer(GuestSink &sink, Stats &stats)
    : sink_(sink), stats_(stats) {
    buf_.reserve(65536 + 256);
}

bool Coalescer::parse(std::span<const uint8_t> fr, Flow &f) const {
    if (fr.size() < kEthLen + 40) return false;
    const uint8_t *p = fr.data();
    uint16_t type = be16(p + 12);
    f.l3_off = kEthLen;
    size_t l4_off, ip_total;
    if (type == 0x0800) {
        const uint8_t *ip = p + kEthLen;
        // IPv4 without options, TCP, not fragmented.
        if (ip[0] != 0x45 || ip[9] != 6 || (be16(ip + 6) & 0x3fff) != 0)
            return false;
        ip_total = be16(ip + 2);
        l4_off = kEthLen + 20;
        f.ipv6 = false;
    } else if (type == 0x86dd) {
        const uint8_t *ip = p + kEthLen;
        if ((ip[0] >> 4) != 6 || ip[6] != 6) return false; // TCP, no ext hdrs
        ip_total = 40 + be16(ip + 4);
        l4_off = kEthLen + 40;
        f.ipv6 = true;
    } else {
        return false;
    }
    if (kEthLen + ip_total != fr.size() || fr.size() < l4_off + 20) return false;
    const uint8_t *tcp = p + l4_off;
    if ((tcp[12] >> 4) != 5) return false; // no TCP options
    f.flags = tcp[13];
    f.hdr_len = l4_off + 20;
    f.payload = uint16_t(fr.size() - f.hdr_len);
    f.seq = be32(tcp + 4);
    f.ack = be32(tcp + 8);
    // Data segments (ACK, maybe PSH) and pure ACKs.
    return f.payload > 0 ? (f.flags & ~kTcpPsh) == kTcpAck : f.flags == kTcpAck;
}

bool Coalescer::supersedes(std::span<const uint8_t> fr, const Flow &f) const {
    if (!ack_pending_ || fr.size() != ack_.size() ||
        int32_t(f.ack - ack_no_) <= 0) // equal: a duplicate ACK, keep both
        return false;
    // Identical headers but for the IPv4 id and checksum and the TCP ack,
    // window and checksum.
    uint8_t a[kEthLen + 60], b[kEthLen + 60];
    std::memcpy(a, ack_.data(), f.hdr_len);
    std::memcpy(b, fr.data(), f.hdr_len);
    for (uint8_t *h : {a, b}) {
        if (!f.ipv6) {
            std::memset(h + kEthLen + 4, 0, 2);  // id
            std::memset(h + kEthLen + 10, 0, 2); // header checksum
        }
        uint8_t *tcp = h + f.hdr_len - 20;
        std::memset(tcp + 8, 0, 4);  // ack
        std::memset(tcp + 14, 0, 4); // window, checksum
    }
    return std::memcmp(a, b, f.hdr_len) == 0;
}

bool Coalescer::can_append(const Flow &f) const {
    if (segments_ == 0 || push_flag_ || f.ipv6 != ipv6_ ||
        f.hdr_len != hdr_len_ || f.seq != next_seq_ ||
        last_len_ != gso_size_ || f.payload > gso_size_ ||
        buf_.size() + f.payload > kMaxMerged)
        return false;
    return true;
}

void Coalescer::push(std::span<const uint8_t> frame) {
    Flow f;
    if (!parse(frame, f)) {
        flush();
        sink_.write_frame(VnetHdr{}, frame, {});
        return;
    }
    if (f.payload == 0) {
        // libslirp ACKs every segment it takes in: of consecutive pure
        // ACKs of one flow only the latest, cumulative one goes out.
        if (supersedes(frame, f)) {
            Stats::add(stats_.acks_superseded, 1);
        } else {
            flush();
        }
        ack_.assign(frame.begin(), frame.end());
        ack_no_ = f.ack;
        ack_pending_ = true;
        return;
    }
    if (size_t(f.payload) * 2 + f.hdr_len > kMaxMerged) {
        // Nothing could join it (MTU 65520 segments): only its headers are
        // copied, to make the checksum partial; the payload goes straight
        // from libslirp's buffer.
        flush();
        head_.assign(frame.begin(), frame.begin() + long(f.hdr_len));
        VnetHdr h = partial_checksum(head_.data(), f.l3_off, f.hdr_len,
                                     frame.size() - (f.hdr_len - 20), f.ipv6);
        sink_.write_frame(h, head_, frame.subspan(f.hdr_len));
        return;
    }
    if (can_append(f)) {
        // Same addresses, ports, ack, window and TTL as the pending
        // segment: everything in the headers but seq, lengths, checksums.
        const uint8_t *a = buf_.data(), *b = frame.data();
        size_t tcp = hdr_len_ - 20;
        bool same = std::memcmp(a, b, kEthLen) == 0 &&
                    std::memcmp(a + tcp, b + tcp, 4) == 0 &&          // ports
                    std::memcmp(a + tcp + 8, b + tcp + 8, 4) == 0 &&  // ack
                    std::memcmp(a + tcp + 14, b + tcp + 14, 2) == 0;  // window
        if (ipv6_)
            same = same && std::memcmp(a + kEthLen + 8, b + kEthLen + 8, 32) == 0 &&
                   a[kEthLen + 7] == b[kEthLen + 7];
        else
            same = same && std::memcmp(a + kEthLen + 12, b + kEthLen + 12, 8) == 0 &&
                   a[kEthLen + 8] == b[kEthLen + 8] && a[kEthLen + 1] == b[kEthLen + 1];
        if (same) {
            buf_.insert(buf_.end(), frame.begin() + long(hdr_len_), frame.end());
            ++segments_;
            last_len_ = f.payload;
            next_seq_ += f.payload;
            push_flag_ = (f.flags & kTcpPsh) != 0;
            return;
        }
    }
    flush();
    buf_.assign(frame.begin(), frame.end());
    segments_ = 1;
    hdr_len_ = f.hdr_len;
    l3_off_ = f.l3_off;
    ipv6_ = f.ipv6;
    gso_size_ = last_len_ = f.payload;
    next_seq_ = f.seq + f.payload;
    push_flag_ = (f.flags & kTcpPsh) != 0;
}

void Coalescer::emit_pending() {
    uint8_t *ip = buf_.data() + l3_off_;
    size_t l4_len = buf_.size() - (hdr_len_ - 20);
    if (segments_ > 1) { // the merged frame's lengths, PSH of the last one
        if (ipv6_) {
            put_be16(ip + 4, uint16_t(l4_len));
        } else {
            put_be16(ip + 2, uint16_t(buf_.size() - l3_off_));
            set_ipv4_checksum(ip, 20);
        }
        if (push_flag_) buf_[hdr_len_ - 20 + 13] |= kTcpPsh;
    }
    VnetHdr h = partial_checksum(buf_.data(), l3_off_, hdr_len_, l4_len, ipv6_);
    if (segments_ > 1) {
        Stats::add(stats_.segments_merged, segments_);
        h.gso_type = ipv6_ ? kVnetGsoTcp6 : kVnetGsoTcp4;
        h.gso_size = gso_size_;
    }
    sink_.write_frame(h, buf_, {});
}

void Coalescer::flush() {
    if (ack_pending_) {
        ack_pending_ = false;
        sink_.write_frame(VnetHdr{}, ack_, {});
    }
    if (segments_ == 0) return;
    emit_pending();
    segments_ = 0;
    buf_.clear();
}

} // namespace rknp
