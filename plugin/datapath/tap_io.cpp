// Reading and writing tap frames.
#include "datapath/tap_io.hpp"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/error.hpp"

namespace rknp {

void TapIo::attach(UniqueFd tap, bool vnet_hdr) {
    int flags = ::fcntl(tap.get(), F_GETFL);
    if (flags < 0 || ::fcntl(tap.get(), F_SETFL, flags | O_NONBLOCK) < 0)
        throw_errno("set tap non-blocking");
    tap_ = std::move(tap);
    vnet_hdr_ = vnet_hdr;
}

ssize_t TapIo::read(std::span<uint8_t> buf) {
    return ::read(tap_.get(), buf.data(), buf.size());
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
