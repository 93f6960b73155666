// SPDX-License-Identifier: Apache-2.0

// The tap in the parent: non-blocking reads of guest frames and writes of
// guest-bound frames (with the vnet header when the tap has offloads on),
// counted in Stats, and when the loop reads (a burst read dry, one frame
// a wake-up otherwise, the guest's answer to a frame just written before
// the wait). Stack thread only.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <algorithm>
#include <span>
#include <string>

#include "common/fd.hpp"
#include "common/stats.hpp"
#include "datapath/guest_sink.hpp"

namespace rknp {

// What one read(2) of the tap means for the loop.
enum class TapRead {
    Frame,     // a whole frame
    Truncated, // it filled the buffer: cut, drop it
    Retry,     // EINTR
    Empty,     // EAGAIN: nothing left
    DropOne,   // an error of this frame only: drop it, keep reading
    Gone,      // end of file or an error of the tap itself: detach
};
// n and errno as read(2) returned them into a buffer of buf_size bytes.
TapRead classify_tap_read(ssize_t n, int err, size_t buf_size);

class TapIo final : public GuestSink {
public:
    explicit TapIo(Stats &stats) : stats_(stats) {}

    void attach(UniqueFd tap, bool vnet_hdr);
    void detach() { tap_.reset(); }
    bool attached() const { return tap_.valid(); }
    bool vnet_hdr() const { return vnet_hdr_; }
    int fd() const { return tap_.get(); }

    // One read(2) of a frame into buf: what it means (len set for Frame),
    // truncated and per-frame failures dropped and counted here. errno is
    // left as read(2) set it.
    TapRead read_frame(std::span<uint8_t> buf, size_t &len);
    // A guest-bound frame that could not be built: counted as dropped.
    void drop_frame() { Stats::add(stats_.frames_dropped, 1); }
    // Frames for a detached tap are dropped and counted.
    void write_frame(const VnetHdr &h, std::span<const uint8_t> frame,
                     std::span<const uint8_t> rest) override;
    // One writev, vnet header and frame first (at most kMaxParts parts).
    void write_frame_parts(const VnetHdr &h, std::span<const uint8_t> frame,
                           std::span<const iovec> rest) override;
    static constexpr size_t kMaxParts = 64;
    // Whether a loop round whose wait found the tap readable or not
    // (ready) should read it dry rather than read one frame: once it was
    // readable kBurstRounds rounds running. Reading a burst dry costs one
    // read past its end (EAGAIN); one frame a round costs a wait for each
    // further frame: the same at two frames a wake-up, so only a third
    // round running says reading dry pays. Two were too few: a guest's
    // short connection has its RST and its next SYN in two rounds, one
    // frame each, and paid an EAGAIN read for each connection.
    bool burst(bool ready) {
        ready_rounds_ = ready ? std::min(ready_rounds_ + 1, kBurstRounds) : 0;
        return ready_rounds_ == kBurstRounds;
    }
    static constexpr int kBurstRounds = 3;
    // A frame just written draws an answer from the guest's kernel (see
    // GuestSink::expect_answer), and the tap was not read since: the
    // answer is most likely queued already.
    bool answer_due() const { return answer_due_; }
    void expect_answer() override { answer_due_ = true; }

    // Whether the tap takes UDP GSO frames (VIRTIO_NET_HDR_GSO_UDP_L4,
    // Linux >= 6.2; older kernels refuse the write with EINVAL). Asks by
    // writing one such frame addressed to a MAC no guest has, which the
    // guest's stack drops as another host's. Only with vnet headers.
    bool takes_udp_gso();

private:
    static constexpr size_t kProbeLen = 14 + 20 + 8 + 16;
    Stats &stats_;
    UniqueFd tap_;
    bool vnet_hdr_ = false;
    bool answer_due_ = false;
    int ready_rounds_ = 0; // rounds running the tap was readable (capped)
};

} // namespace rknp
