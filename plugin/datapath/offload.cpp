// SPDX-License-Identifier: Apache-2.0

// Guest -> stack frame preparation and the partial checksums of
// stack -> guest TCP segments and UDP datagrams.
#include "datapath/offload.hpp"

#include <cstring>

#include "datapath/checksum.hpp"

namespace rknp {

bool complete_checksum(std::span<uint8_t> frame, const VnetHdr &h) {
    size_t start = h.csum_start, field = start + h.csum_offset;
    if (start >= frame.size() || field + 2 > frame.size()) return false;
    // The field holds the pseudo-header sum; sum it with the data.
    uint16_t sum = csum_fold(csum_add(0, frame.data() + start, frame.size() - start));
    put_be16(frame.data() + field, uint16_t(~sum));
    return true;
}

TapFrame split_tap_frame(std::span<uint8_t> raw, bool vnet) {
    TapFrame f;
    if (!vnet) {
        f.eth = raw;
        return f;
    }
    if (raw.size() < kVnetHdrSize) return f;
    std::memcpy(&f.hdr, raw.data(), sizeof f.hdr);
    f.eth = raw.subspan(kVnetHdrSize);
    f.csum_partial = (f.hdr.flags & kVnetNeedsCsum) != 0;
    return f;
}

bool finish_checksum(TapFrame &f) {
    // A TSO super-frame is passed whole: libslirp is the TCP endpoint, so
    // nothing needs segmenting; only the checksum must be finished.
    if (!f.csum_partial) return true;
    f.csum_partial = false;
    return complete_checksum(f.eth, f.hdr);
}

VnetHdr partial_l4_checksum(uint8_t *f, size_t l3_off, size_t l4_off,
                            size_t hdr_len, size_t l4_len, bool ipv6,
                            uint8_t proto) {
    const uint8_t *ip = f + l3_off;
    uint64_t pseudo;
    if (ipv6) {
        uint8_t tail[8] = {0, 0, uint8_t(l4_len >> 8), uint8_t(l4_len), 0, 0, 0, proto};
        pseudo = csum_add(csum_add(0, ip + 8, 32), tail, 8);
    } else {
        uint8_t tail[4] = {0, proto, uint8_t(l4_len >> 8), uint8_t(l4_len)};
        pseudo = csum_add(csum_add(0, ip + 12, 8), tail, 4);
    }
    const uint16_t field = proto == kProtoUdp ? 6 : 16;
    put_be16(f + l4_off + field, csum_fold(pseudo));
    VnetHdr h{};
    h.flags = kVnetNeedsCsum;
    h.hdr_len = uint16_t(hdr_len);
    h.csum_start = uint16_t(l4_off);
    h.csum_offset = field;
    return h;
}

VnetHdr partial_checksum(uint8_t *f, size_t l3_off, size_t hdr_len,
                         size_t l4_len, bool ipv6) {
    return partial_l4_checksum(f, l3_off, hdr_len - 20, hdr_len, l4_len, ipv6,
                               kProtoTcp);
}

} // namespace rknp
