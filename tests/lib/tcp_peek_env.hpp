// SPDX-License-Identifier: Apache-2.0

// The test hook for the TCP fast path's peek mode: RKNP_TEST_TCP_PEEK_MODE
// (discard | offset | auto, unset = auto) sets FastPathConfig::peek_mode
// wherever the tests build a FastPath, so the same cases run in Discard
// mode on a kernel that has SO_PEEK_OFF (ctest unit-tcp-discard).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "datapath/tcp/fastpath_config.hpp"

namespace tcpsim {

inline rknp::tcp::PeekMode test_peek_mode() {
    const char *v = std::getenv("RKNP_TEST_TCP_PEEK_MODE");
    if (v == nullptr || *v == '\0' || std::strcmp(v, "auto") == 0)
        return rknp::tcp::PeekMode::Automatic;
    if (std::strcmp(v, "discard") == 0) return rknp::tcp::PeekMode::Discard;
    if (std::strcmp(v, "offset") == 0) return rknp::tcp::PeekMode::Offset;
    std::fprintf(stderr, "RKNP_TEST_TCP_PEEK_MODE=%s: want discard, offset or auto\n", v);
    std::abort();
}

inline void apply_test_peek_mode(rknp::tcp::FastPathConfig &c) {
    c.peek_mode = test_peek_mode();
}

} // namespace tcpsim
