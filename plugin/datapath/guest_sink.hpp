// SPDX-License-Identifier: Apache-2.0

// Where guest-bound frames go: the tap (TapIo) in the stack, a collector in
// tests. One virtual call per frame, no type-erased callable.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <span>
#include <vector>

#include "datapath/offload.hpp"

namespace rknp {

class GuestSink {
public:
    // Writes one frame, given as frame followed by rest (often empty, so
    // large payloads need no copy), with its vnet header (ignored when the
    // tap has none).
    virtual void write_frame(const VnetHdr &h, std::span<const uint8_t> frame,
                             std::span<const uint8_t> rest) = 0;

    // The same with the rest gathered from several buffers (a GSO frame of
    // datagrams read one by one). The tap writes them as they are; other
    // sinks get them joined, in a buffer kept for the next frame.
    virtual void write_frame_parts(const VnetHdr &h, std::span<const uint8_t> frame,
                                   std::span<const iovec> rest) {
        joined_.clear();
        for (const iovec &v : rest) {
            const auto *p = static_cast<const uint8_t *>(v.iov_base);
            joined_.insert(joined_.end(), p, p + v.iov_len);
        }
        write_frame(h, frame, joined_);
    }

    // The frames just written draw an answer from the guest's kernel while
    // they are written: a tap write runs the guest's receive path in the
    // writer's thread, so the ACK of a SYN-ACK or of data the guest acks
    // at once, or an ARP reply, is queued on the tap when the write
    // returns. The loop reads it before it waits (a wait would only say it
    // is there): a wake-up saved per such exchange.
    virtual void expect_answer() {}

protected:
    ~GuestSink() = default;

private:
    std::vector<uint8_t> joined_;
};

} // namespace rknp
