// SPDX-License-Identifier: Apache-2.0

// Where guest-bound frames go: the tap (TapIo) in the stack, a collector in
// tests. One virtual call per frame, no type-erased callable.
#pragma once

#include <span>

#include "datapath/offload.hpp"

namespace rknp {

class GuestSink {
public:
    // Writes one frame, given as frame followed by rest (often empty, so
    // large payloads need no copy), with its vnet header (ignored when the
    // tap has none).
    virtual void write_frame(const VnetHdr &h, std::span<const uint8_t> frame,
                             std::span<const uint8_t> rest) = 0;

protected:
    ~GuestSink() = default;
};

} // namespace rknp
