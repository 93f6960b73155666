// SPDX-License-Identifier: Apache-2.0

// Empties libslirp's guest-bound output queue before slirp_cleanup.
// libslirp before 4.8.0 frees only the first frame of each session in that
// queue (m_cleanup_list; fixed upstream by "m_cleanup_list: Fix missing
// cleanup packets from the same session"), and frames stay queued while the
// guest has not answered ARP/NDP for their destination: a guest that stays
// silent makes every teardown leak them. libslirp drops a queued frame one
// second after it first asked for the guest's address, so polling it with
// its clock moved on drops them all. The libslirp user routes its clock and
// send_packet callbacks through this object; while it runs, frames are
// discarded, so nothing reaches the guest during teardown.
#pragma once

#include <slirp/libslirp.h>

#include <cstdint>

namespace rknp {

class SlirpQueueDrain {
public:
    // Added to libslirp's clock by its clock_get_ns callback.
    int64_t clock_offset_ns() const { return offset_ns_; }

    // Called first by send_packet: true while draining (the frame is
    // counted and must be discarded).
    bool discard_frame() {
        if (!active_) return false;
        ++frames_;
        return true;
    }

    // Polls libslirp (sockets skipped) with its clock two seconds further
    // each round until two rounds in a row emit nothing. A queued frame is
    // tried in the first round it is at the head of its session (libslirp
    // then sends the frame, an ARP request or a neighbour solicitation) and
    // dropped in the next, so two silent rounds mean an empty queue. Timers
    // firing meanwhile (retransmissions) only add rounds; kMaxRounds bounds
    // a guest that made libslirp queue thousands of tiny segments. Returns
    // whether the queue was seen empty.
    bool run(Slirp *slirp) {
        active_ = true;
        int silent = 0;
        for (int round = 0; round < kMaxRounds && silent < 2; ++round) {
            uint64_t before = frames_;
            offset_ns_ += 2'000'000'000;
            slirp_pollfds_poll(slirp, /*select_error=*/1, no_revents, nullptr);
            silent = frames_ == before ? silent + 1 : 0;
        }
        return silent >= 2;
    }

private:
    static constexpr int kMaxRounds = 4096;
    static int no_revents(int, void *) { return 0; }

    int64_t offset_ns_ = 0;
    uint64_t frames_ = 0;
    bool active_ = false;
};

} // namespace rknp
