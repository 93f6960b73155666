// SPDX-License-Identifier: Apache-2.0

// Keeps guest TCP away from libslirp 4.7.0's reassembly-queue loop (fixed
// in 4.8.0, commit bdba265d): when tcp_reass hands queued data to the
// socket and the receive sequence it reaches is exactly 0, its end-of-queue
// test reads the queue head as a segment whose sequence is 0 (zeroed bytes
// of the tcpcb), takes it for the next one and corrupts the queue: the
// stack thread spins or crashes, and rootlesskit with it. Data reaches
// tcp_reass when it is out of order, or in order while segments are queued
// or after libslirp sent its FIN. So, for flows libslirp carries:
//   - out-of-order segments are dropped while libslirp's next expected
//     sequence (the ACK it last sent the guest) lies within two windows
//     (libslirp's window is at most 65535) before 0: nothing can be queued
//     that reaches 0, and the in-order segment that does reach it takes
//     libslirp's direct path;
//   - once libslirp sent its FIN (all data then takes tcp_reass), segments
//     whose data or FIN ends exactly at 0 are dropped; one that passes 0
//     goes through (rcv_nxt lands past it);
//   - flows with no ACK from libslirp known (a slot lost to another flow)
//     have segments within two windows of 0, or reaching it, dropped.
// A dropped segment is what a lossy link does: the guest sends it again,
// in order. Fixed memory: one 16-byte slot per hash bucket, keyed.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

namespace rknp {

class ReassWrapGuard {
public:
    ReassWrapGuard();

    // A frame libslirp sends the guest: notes the ACK and FIN of a TCP
    // segment.
    void from_slirp(std::span<const uint8_t> frame);
    // A guest frame on its way to libslirp: false if it must be dropped.
    bool allow(std::span<const uint8_t> frame);

    // Sequence distance before 0 in which out-of-order data is refused.
    static constexpr uint32_t kZone = 2 * 65536;

private:
    struct Slot {
        uint64_t key = 0; // keyed hash of the 4-tuple; 0: empty
        uint32_t rcv_nxt = 0;
        uint32_t fin_sent = 0;
    };
    static constexpr size_t kSlots = 16384;

    Slot *find(uint64_t key);

    std::unique_ptr<Slot[]> slots_;
    uint64_t seed_ = 0;
};

} // namespace rknp
