// SPDX-License-Identifier: Apache-2.0

// How the fast path peeks at host sockets: the choice between SO_PEEK_OFF
// (Offset) and the discard mode of kernels before 6.9 (Discard), made once
// per FastPath from the configuration and the kernel's answer, and the
// discard mode's fixed scratch (see docs/tcp-fast-path.md, "Peek modes").
//
// Discard: the guest has not acknowledged snd_nxt - snd_una bytes, which
// are still at the start of the socket's receive queue; a peek starts
// there, so its first iovecs take those bytes again into one 64 KiB
// discard buffer, repeated as often as needed (the kernel only writes
// them), and the frames' payload buffers follow. A flow peeks only when
// that brings at least as many new bytes as it skips (Flow::push), so the
// skip never exceeds what one peek carries: kMaxSkip, kSkipIovs entries.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "datapath/tcp/fastpath_config.hpp"

namespace rknp::tcp {

// The mode in force (Offset or Discard) and why, for the start log line.
struct PeekChoice {
    PeekMode mode;
    const char *reason;
};

// True if setsockopt(SO_PEEK_OFF) works on a fresh TCP socket (Linux >= 6.9).
bool kernel_has_tcp_peek_off();

// Automatic: Offset if probe() (kernel_has_tcp_peek_off when empty) says
// the kernel has SO_PEEK_OFF for TCP, else Discard. Offset forced on a
// kernel without it throws Error(RKNP_ERR_UNSUPPORTED) naming the option.
PeekChoice choose_peek_mode(PeekMode requested, const std::function<bool()> &probe);

const char *peek_mode_name(PeekMode m);

// The iovec array of every peek and, in Discard mode, the discard buffer.
// Allocated once with the FastPath: nothing per frame.
class PeekScratch {
public:
    static constexpr size_t kDiscardBytes = 64 * 1024;
    static constexpr size_t kDataIovs = 64;  // frames filled per peek at most
    // The most a Discard peek skips: what one peek can carry (64 frames of
    // at most 64 KiB), so a flow has at most twice that in flight.
    static constexpr size_t kSkipIovs = kDataIovs;
    static constexpr size_t kIovs = kSkipIovs + kDataIovs; // <= UIO_MAXIOV
    static constexpr uint32_t kMaxSkip = uint32_t(kSkipIovs * kDiscardBytes); // 4 MiB

    explicit PeekScratch(PeekMode mode);
    PeekScratch(const PeekScratch &) = delete;
    PeekScratch &operator=(const PeekScratch &) = delete;

    PeekMode mode() const { return mode_; }
    bool discard() const { return mode_ == PeekMode::Discard; }
    iovec *iov() { return iov_.data(); }
    // Discard only: fills the first entries of iov() with the discard
    // buffer, skip bytes in all (skip <= kMaxSkip); returns how many.
    size_t cover(uint32_t skip);

private:
    PeekMode mode_;
    std::vector<uint8_t> discard_;
    std::vector<iovec> iov_;
};

} // namespace rknp::tcp
