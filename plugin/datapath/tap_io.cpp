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
    if (!tap_) {
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

void TapIo::write_iov(std::span<const iovec> iov) {
    if (!tap_ || ::writev(tap_.get(), iov.data(), int(iov.size())) < 0) {
        Stats::add(stats_.frames_dropped, 1);
        return;
    }
    size_t bytes = 0;
    for (size_t i = 1; i < iov.size(); ++i) bytes += iov[i].iov_len;
    Stats::add(stats_.frames_to_tap, 1);
    Stats::add(stats_.bytes_to_tap, bytes);
}

} // namespace rknp
