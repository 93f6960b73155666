// SPDX-License-Identifier: Apache-2.0

// GuestFrames: the fast path's output batch of guest-bound frames. All
// memory is allocated at construction: per slot a vnet header, a header
// buffer and (for data slots) a payload region that host-socket data is
// peeked into directly, so a frame reaches the tap with one writev and no
// copy of its payload. The loop writes frames 0..size()-1 and clear()s.
#pragma once

#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "datapath/offload.hpp"
#include "datapath/tcp/frame.hpp"

namespace rknp::tcp {

class GuestFrames {
public:
    // data_frames slots may carry payload; control_frames more are kept
    // for pure ACK/FIN/RST/SYN-ACK frames, so that control traffic is not
    // starved by a full batch of data.
    GuestFrames(size_t data_frames, size_t control_frames);
    GuestFrames(const GuestFrames &) = delete;
    GuestFrames &operator=(const GuestFrames &) = delete;

    size_t size() const { return n_; }
    bool empty() const { return n_ == 0; }
    size_t capacity() const { return slots_.size(); }
    void clear() {
        n_ = 0;
        answer_due_ = false;
    }
    // A frame in the batch draws an answer from the guest's kernel while it
    // is written (GuestSink::expect_answer): a SYN or SYN-ACK, data marked
    // OutFields::acked_at_once, an ARP request.
    bool answer_due() const { return answer_due_; }

    // The frame's iovecs for one writev: vnet header, headers, payload
    // (the last only if there is payload).
    std::span<const iovec> iov(size_t i) const {
        const Slot &s = slots_[i];
        return {s.iov.data(), s.payload_len != 0 ? size_t(3) : size_t(2)};
    }
    // For tests and tracing.
    const VnetHdr &vnet(size_t i) const { return slots_[i].vnet; }
    std::span<const uint8_t> headers(size_t i) const {
        return {slots_[i].hdr.data(), slots_[i].hdr_len};
    }
    std::span<const uint8_t> payload(size_t i) const {
        return {slots_[i].payload, slots_[i].payload_len};
    }

    // Producer side (the fast path).
    // Slots still free for data frames, and payload room of each.
    size_t data_room() const { return n_ < data_cap_ ? data_cap_ - n_ : 0; }
    bool control_room() const { return n_ < slots_.size(); }
    // Payload buffer of the k-th next slot (k < data_room()), kMaxPayload
    // bytes, to peek into before the frame is appended.
    uint8_t *next_payload(size_t k) { return payload_buf_.data() + (n_ + k) * kMaxPayload; }
    // Appends a frame: builds its headers; payload_len bytes must already
    // be in next_payload(0) (only when data_room() > 0).
    void append(const Endpoints &ep, const OutFields &f, size_t payload_len,
                uint16_t mss);
    // Appends a frame that is not TCP (an ARP request), at most
    // kMaxHeaders bytes, with a vnet header asking for nothing.
    void append_raw(std::span<const uint8_t> frame);

private:
    struct Slot {
        VnetHdr vnet{};
        std::array<uint8_t, kMaxHeaders> hdr{};
        size_t hdr_len = 0;
        uint8_t *payload = nullptr;
        size_t payload_len = 0;
        std::array<iovec, 3> iov{};
    };
    std::vector<Slot> slots_;
    std::vector<uint8_t> payload_buf_;
    size_t data_cap_;
    size_t n_ = 0;
    bool answer_due_ = false;
};

} // namespace rknp::tcp
