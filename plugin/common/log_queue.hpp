// SPDX-License-Identifier: Apache-2.0

// The stack thread's log records on their way to the caller's callback: a
// fixed ring the stack thread fills without ever blocking or calling the
// caller's code, emptied by a library-owned logger thread. Other threads
// deliver through the same queue, in order.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>

#include "common/fd.hpp"
#include "rknp.h"

namespace rknp {

class LogQueue {
public:
    // Records per ring and the text each holds (longer ones are cut).
    static constexpr size_t kSlots = 256;
    static constexpr size_t kTextBytes = 480;

    LogQueue(rknp_log_fn fn, void *user);
    ~LogQueue();
    LogQueue(const LogQueue &) = delete;
    LogQueue &operator=(const LogQueue &) = delete;

    // Starts the logger thread; throws Error. Until then (and after
    // stop) queued records wait for the next deliver() or stop().
    void start();
    // Delivers every queued record, then ends the logger thread and closes
    // its wake-up fd. Idempotent; not from inside the callback
    // (in_callback()), nor while the producer may push.
    void stop() noexcept;

    // The single producer (the stack thread): copies msg into the ring and
    // wakes the logger thread. Never blocks; a full ring drops the record
    // and counts it (reported with the next delivery).
    void push(int32_t level, std::string_view msg) noexcept;
    // Any other thread: delivers what is queued, then msg, in this thread.
    void deliver(int32_t level, std::string_view msg) noexcept;

    // Whether the calling thread is inside the callback right now.
    static bool in_callback() noexcept;
    // Records dropped because the ring was full, since the last report.
    uint64_t dropped() const { return dropped_.load(); }

private:
    struct Record {
        int32_t level;
        uint32_t len;
        char text[kTextBytes];
    };

    void run() noexcept;
    void drain_locked() noexcept; // with deliver_mu_ held
    void call(int32_t level, const char *msg) noexcept;

    rknp_log_fn fn_;
    void *user_;
    std::unique_ptr<Record[]> ring_;
    std::atomic<uint64_t> head_{0}; // next slot the producer writes
    std::atomic<uint64_t> tail_{0}; // next slot a consumer reads
    std::atomic<uint64_t> dropped_{0};
    std::mutex deliver_mu_; // one consumer at a time; keeps the order
    UniqueFd wake_;         // eventfd: records are waiting, or stop
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

} // namespace rknp
