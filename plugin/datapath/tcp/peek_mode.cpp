// SPDX-License-Identifier: Apache-2.0

// The peek mode's choice (kernel probe, configuration) and the discard
// scratch's set-up; peek_mode.hpp says what the modes are.
#include "datapath/tcp/peek_mode.hpp"

#include <sys/socket.h>

#include <algorithm>

#include "common/error.hpp"
#include "common/fd.hpp"

namespace rknp::tcp {

bool kernel_has_tcp_peek_off() {
    UniqueFd probe(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!probe) probe.reset(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!probe) return false; // no socket to ask: the mode that needs nothing
    int zero = 0;
    return ::setsockopt(probe.get(), SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof zero) == 0;
}

PeekChoice choose_peek_mode(PeekMode requested, const std::function<bool()> &probe) {
    if (requested == PeekMode::Discard)
        return {PeekMode::Discard, "forced by tcp_peek_mode"};
    const bool has = probe ? probe() : kernel_has_tcp_peek_off();
    if (requested == PeekMode::Offset) {
        if (!has)
            throw Error(RKNP_ERR_UNSUPPORTED,
                        "TCP fast path: tcp_peek_mode offset needs SO_PEEK_OFF on TCP "
                        "sockets (Linux >= 6.9), which this kernel refuses; use "
                        "RKNP_TCP_PEEK_AUTO or _DISCARD");
        return {PeekMode::Offset, "forced by tcp_peek_mode"};
    }
    if (has) return {PeekMode::Offset, "the kernel has SO_PEEK_OFF for TCP (Linux >= 6.9)"};
    return {PeekMode::Discard, "the kernel has no SO_PEEK_OFF for TCP (Linux < 6.9): "
                               "bytes already sent are peeked again into a discard buffer"};
}

const char *peek_mode_name(PeekMode m) {
    switch (m) {
    case PeekMode::Automatic: return "automatic";
    case PeekMode::Offset: return "offset";
    case PeekMode::Discard: return "discard";
    }
    return "?";
}

PeekScratch::PeekScratch(PeekMode mode)
    : mode_(mode), iov_(mode == PeekMode::Discard ? kIovs : kDataIovs) {
    if (mode_ == PeekMode::Discard) discard_.resize(kDiscardBytes);
}

size_t PeekScratch::cover(uint32_t skip) {
    size_t k = 0;
    for (uint32_t left = std::min(skip, kMaxSkip); left != 0; ++k) {
        const size_t l = std::min<size_t>(left, discard_.size());
        iov_[k] = {discard_.data(), l};
        left -= uint32_t(l);
    }
    return k;
}

} // namespace rknp::tcp
