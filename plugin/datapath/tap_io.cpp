// SPDX-License-Identifier: Apache-2.0

// Reading and writing tap frames.
#include "datapath/tap_io.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/error.hpp"

namespace rknp {

TapRead classify_tap_read(ssize_t n, int err, size_t buf_size) {
    if (n > 0)
        return size_t(n) < buf_size ? TapRead::Frame : TapRead::Truncated;
    if (n == 0) return TapRead::Gone;
    switch (err) {
    case EINTR:
        return TapRead::Retry;
    case EAGAIN:
        return TapRead::Empty;
    // tun fails one frame with these (bad lengths, copy faults, no
    // memory for it): the tap itself is fine.
    case EINVAL:
    case EFAULT:
    case EMSGSIZE:
    case ENOBUFS:
    case ENOMEM:
        return TapRead::DropOne;
    default:
        // EBADFD: the device went with the child's network namespace;
        // EBADF, EIO, ENODEV, ENXIO and anything unknown: a tap that keeps
        // failing would spin the loop, so it is let go.
        return TapRead::Gone;
    }
}

void TapIo::attach(UniqueFd tap, bool vnet_hdr) {
    int flags = ::fcntl(tap.get(), F_GETFL);
    if (flags < 0 || ::fcntl(tap.get(), F_SETFL, flags | O_NONBLOCK) < 0)
        throw_errno("set tap non-blocking");
    tap_ = std::move(tap);
    vnet_hdr_ = vnet_hdr;
}

TapRead TapIo::read_frame(std::span<uint8_t> buf, size_t &len) {
    answer_due_ = false; // this read (or the next wait) sees the answer
    ssize_t n = ::read(tap_.get(), buf.data(), buf.size());
    int err = n < 0 ? errno : 0;
    TapRead r = classify_tap_read(n, err, buf.size());
    if (r == TapRead::Frame) len = size_t(n);
    if (r == TapRead::Truncated) Stats::add(stats_.frames_truncated, 1);
    if (r == TapRead::Truncated || r == TapRead::DropOne)
        Stats::add(stats_.frames_dropped, 1);
    errno = err;
    return r;
}

void TapIo::write_frame(const VnetHdr &h, std::span<const uint8_t> frame,
                        std::span<const uint8_t> rest) {
    // A frame that needs offloads (a partial checksum, GSO) cannot go to a
    // tap without vnet headers: a path's frame while the tap lacks them
    // (a forward's SYN; the stack loop moves the forwards away).
    if (!tap_ || (!vnet_hdr_ && (h.flags != 0 || h.gso_type != 0))) {
        Stats::add(stats_.frames_dropped, 1);
        return;
    }
    iovec iov[3] = {{const_cast<VnetHdr *>(&h), kVnetHdrSize},
                    {const_cast<uint8_t *>(frame.data()), frame.size()},
                    {const_cast<uint8_t *>(rest.data()), rest.size()}};
    int first = vnet_hdr_ ? 0 : 1, count = rest.empty() ? 2 : 3;
    ssize_t n = ::writev(tap_.get(), iov + first, count - first);
    // Dropped frames are retransmitted by TCP; errors here only add noise.
    if (n < 0) {
        Stats::add(stats_.frames_dropped, 1);
        return;
    }
    Stats::add(stats_.frames_to_tap, 1);
    Stats::add(stats_.bytes_to_tap, frame.size() + rest.size());
}

void TapIo::write_frame_parts(const VnetHdr &h, std::span<const uint8_t> frame,
                              std::span<const iovec> rest) {
    if (!tap_ || rest.size() > kMaxParts ||
        (!vnet_hdr_ && (h.flags != 0 || h.gso_type != 0))) { // as write_frame
        Stats::add(stats_.frames_dropped, 1);
        return;
    }
    iovec iov[kMaxParts + 2] = {{const_cast<VnetHdr *>(&h), kVnetHdrSize},
                                {const_cast<uint8_t *>(frame.data()), frame.size()}};
    size_t bytes = frame.size();
    for (size_t i = 0; i < rest.size(); ++i) {
        iov[2 + i] = rest[i];
        bytes += rest[i].iov_len;
    }
    const int first = vnet_hdr_ ? 0 : 1;
    if (::writev(tap_.get(), iov + first, int(2 + rest.size()) - first) < 0) {
        Stats::add(stats_.frames_dropped, 1);
        return;
    }
    Stats::add(stats_.frames_to_tap, 1);
    Stats::add(stats_.bytes_to_tap, bytes);
}

bool TapIo::takes_udp_gso() {
    if (!tap_ || !vnet_hdr_) return false;
    // Ethernet (to 02:72:6b:6e:70:00, not the guest), IPv4 10.0.2.2 ->
    // 0.0.0.0, UDP 9 -> 9 with two 8-byte segments.
    uint8_t f[kProbeLen] = {0x02, 0x72, 0x6b, 0x6e, 0x70, 0x00, 0x52, 0x55, 10, 0, 2, 2,
                            0x08, 0x00};
    uint8_t *ip = f + 14;
    ip[0] = 0x45;
    ip[3] = uint8_t(kProbeLen - 14);
    ip[8] = 1;
    ip[9] = kProtoUdp;
    ip[12] = 10;
    ip[14] = 2;
    ip[15] = 2;
    uint8_t *udp = ip + 20;
    udp[1] = udp[3] = 9;
    udp[5] = uint8_t(kProbeLen - 34);
    VnetHdr h = partial_l4_checksum(f, 14, 34, 42, kProbeLen - 34, false, kProtoUdp);
    h.gso_type = kVnetGsoUdpL4;
    h.gso_size = 8;
    iovec iov[2] = {{&h, kVnetHdrSize}, {f, sizeof f}};
    return ::writev(tap_.get(), iov, 2) == ssize_t(kVnetHdrSize + sizeof f);
}

} // namespace rknp
