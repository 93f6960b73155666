// SPDX-License-Identifier: Apache-2.0

// Allocation of the fast path's output batch and the building of its frames.
#include "datapath/tcp/batch.hpp"

#include <algorithm>
#include <cstring>

namespace rknp::tcp {

GuestFrames::GuestFrames(size_t data_frames, size_t control_frames)
    : slots_(data_frames + control_frames),
      payload_buf_(data_frames * kMaxPayload), data_cap_(data_frames) {}

void GuestFrames::append(const Endpoints &ep, const OutFields &f,
                         size_t payload_len, uint16_t mss) {
    Slot &s = slots_[n_];
    s.hdr_len = build_segment(s.hdr.data(), s.vnet, ep, f, payload_len, mss);
    s.payload = payload_len != 0 ? payload_buf_.data() + n_ * kMaxPayload : nullptr;
    s.payload_len = payload_len;
    s.iov[0] = {&s.vnet, kVnetHdrSize};
    s.iov[1] = {s.hdr.data(), s.hdr_len};
    s.iov[2] = {s.payload, payload_len};
    ++n_;
    if ((f.flags & kSyn) != 0 || f.acked_at_once) answer_due_ = true;
}

void GuestFrames::append_raw(std::span<const uint8_t> frame) {
    Slot &s = slots_[n_];
    s.vnet = VnetHdr{};
    s.hdr_len = std::min(frame.size(), s.hdr.size());
    std::memcpy(s.hdr.data(), frame.data(), s.hdr_len);
    s.payload = nullptr;
    s.payload_len = 0;
    s.iov[0] = {&s.vnet, kVnetHdrSize};
    s.iov[1] = {s.hdr.data(), s.hdr_len};
    s.iov[2] = {nullptr, 0};
    ++n_;
    answer_due_ = true; // an ARP request
}

} // namespace rknp::tcp
