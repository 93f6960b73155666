// SPDX-License-Identifier: Apache-2.0

// The libslirp 4.7.0 reassembly-queue loop guard (see the header).
#include "slirp/reass_wrap_guard.hpp"

#include <sys/random.h>

#include "common/hash.hpp"
#include "datapath/tcp/frame.hpp"
#include "datapath/tcp/seq.hpp"

namespace rknp {

namespace {

// The flow's key seen from the guest's side, whichever way the frame went.
uint64_t flow_key(uint64_t seed, const uint8_t guest[16],
                  const uint8_t remote[16], uint16_t gport, uint16_t rport) {
    uint64_t h = seed;
    for (int i = 0; i < 16; i += 8) {
        h = hash_mix(h, load64(guest + i));
        h = hash_mix(h, load64(remote + i));
    }
    h = hash_mix(h, uint64_t(gport) << 16 | rport);
    return h | 1; // 0 marks an empty slot
}

} // namespace

ReassWrapGuard::ReassWrapGuard() : slots_(new Slot[kSlots]) {
    // Keyed: the guest picks the 4-tuples and must not aim at a slot.
    if (::getrandom(&seed_, sizeof seed_, GRND_NONBLOCK) != ssize_t(sizeof seed_))
        seed_ = reinterpret_cast<uintptr_t>(this) * 0x9e3779b97f4a7c15ull;
}

ReassWrapGuard::Slot *ReassWrapGuard::find(uint64_t key) {
    Slot &s = slots_[(key >> 1) % kSlots]; // above the bit flow_key sets
    return s.key == key ? &s : nullptr;
}

void ReassWrapGuard::from_slirp(std::span<const uint8_t> frame) {
    tcp::Segment s;
    if (tcp::parse_segment(frame, s) != Parse::Ok) return;
    if (!(s.flags & tcp::kAck)) return;
    uint64_t key = flow_key(seed_, s.dst, s.src, s.dport, s.sport);
    Slot &slot = slots_[(key >> 1) % kSlots];
    if (slot.key != key) slot = Slot{key, s.ack, 0};
    slot.rcv_nxt = s.ack;
    if (s.flags & tcp::kFin) slot.fin_sent = 1;
    if (s.flags & tcp::kRst) slot = Slot{};
}

bool ReassWrapGuard::allow(std::span<const uint8_t> frame) {
    tcp::Segment s;
    if (tcp::parse_segment(frame, s) != Parse::Ok) return true;
    if (s.flags & (tcp::kSyn | tcp::kRst)) return true;
    uint32_t len = uint32_t(s.payload.size()) + ((s.flags & tcp::kFin) ? 1 : 0);
    if (len == 0) return true; // a pure ACK queues nothing
    const Slot *slot = find(flow_key(seed_, s.src, s.dst, s.sport, s.dport));
    uint32_t end = s.seq + len;
    bool reaches_zero = tcp::seq_between(0, s.seq + 1, end);
    if (slot == nullptr) // unknown expected sequence: near 0, refuse
        return !reaches_zero && uint32_t(s.seq + kZone) > 2 * kZone;
    // After libslirp's FIN every segment goes through tcp_reass, which
    // breaks only when the sequence it reaches is exactly 0: the data's
    // end (the FIN is taken after it) or, to be safe, the FIN's. One that
    // passes 0 lands elsewhere and is let through; holding it back would
    // stall the upload for good, the guest's retransmissions crossing 0
    // the same way.
    const uint32_t data_end = s.seq + uint32_t(s.payload.size());
    if (slot->fin_sent && ((!s.payload.empty() && data_end == 0) || end == 0))
        return false;
    bool near_wrap = uint32_t(0 - slot->rcv_nxt) <= kZone;
    return !(near_wrap && s.seq != slot->rcv_nxt);
}

} // namespace rknp
