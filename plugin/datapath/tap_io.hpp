// SPDX-License-Identifier: Apache-2.0

// The tap in the parent: non-blocking reads of guest frames and writes of
// guest-bound frames (with the vnet header when the tap has offloads on),
// counted in Stats. Stack thread only.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

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
};

} // namespace rknp
