// SPDX-License-Identifier: Apache-2.0

// The log ring (one producer, consumers serialised by deliver_mu_) and the
// logger thread that empties it.
#include "common/log_queue.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/thread_signals.hpp"

namespace rknp {

namespace {
// Set while this thread runs the caller's callback: a log call made from
// inside it goes straight to the callback (deliver_mu_ is held) and a
// close from inside it must not join the logger thread.
thread_local bool t_in_callback = false;
} // namespace

void Logger::log(int32_t level, const std::string &msg) const noexcept {
    if (queue_ != nullptr) {
        if (queued_)
            queue_->push(level, msg);
        else
            queue_->deliver(level, msg);
    } else if (fn_ != nullptr) {
        fn_(user_, level, msg.c_str());
    }
}

LogQueue::LogQueue(rknp_log_fn fn, void *user)
    : fn_(fn), user_(user), ring_(new Record[kSlots]) {}

LogQueue::~LogQueue() { stop(); }

bool LogQueue::in_callback() noexcept { return t_in_callback; }

void LogQueue::start() {
    if (thread_.joinable()) return;
    wake_.reset(::eventfd(0, EFD_CLOEXEC));
    if (!wake_) throw_errno("eventfd");
    stop_.store(false);
    try {
        thread_ = std::thread([this] { run(); });
    } catch (const std::system_error &e) {
        wake_.reset();
        throw Error(RKNP_ERR_SYSTEM,
                    std::string("starting the logger thread: ") + e.what());
    }
}

void LogQueue::stop() noexcept {
    if (thread_.joinable()) {
        stop_.store(true);
        uint64_t one = 1;
        (void)!::write(wake_.get(), &one, sizeof one);
        thread_.join();
    }
    // The wake-up goes with the thread (start makes a new one): a stopped
    // queue holds no fd. The producer, joined before stop (Parent), sees
    // no wake_ and leaves its records to the next deliver() or stop().
    wake_.reset();
    // Records pushed after the thread's last round.
    std::lock_guard lock(deliver_mu_);
    drain_locked();
}

void LogQueue::push(int32_t level, std::string_view msg) noexcept {
    uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_.load(std::memory_order_acquire) >= kSlots) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    Record &r = ring_[head % kSlots];
    r.level = level;
    size_t n = std::min(msg.size(), kTextBytes - 1);
    std::memcpy(r.text, msg.data(), n);
    if (n < msg.size() && n >= 3) std::memcpy(r.text + n - 3, "...", 3);
    r.text[n] = '\0';
    r.len = uint32_t(n);
    head_.store(head + 1, std::memory_order_release);
    if (wake_) { // a full eventfd counter (never in practice) only fails
        uint64_t one = 1;
        (void)!::write(wake_.get(), &one, sizeof one);
    }
}

void LogQueue::deliver(int32_t level, std::string_view msg) noexcept {
    std::string text(msg);
    if (t_in_callback) { // logging from inside the callback: no lock
        call(level, text.c_str());
        return;
    }
    std::lock_guard lock(deliver_mu_);
    drain_locked();
    call(level, text.c_str());
}

void LogQueue::call(int32_t level, const char *msg) noexcept {
    if (fn_ == nullptr) return;
    // Restored, not cleared: a call the callback makes may log and so run
    // the callback again on this thread; the outer one is still running
    // after it returns (a cleared flag would let the outer callback's next
    // log take deliver_mu_, which this thread holds, or a close join).
    const bool outer = t_in_callback;
    t_in_callback = true;
    fn_(user_, level, msg);
    t_in_callback = outer;
}

void LogQueue::drain_locked() noexcept {
    uint64_t lost = dropped_.exchange(0, std::memory_order_relaxed);
    uint64_t tail = tail_.load(std::memory_order_relaxed);
    for (;;) {
        if (tail == head_.load(std::memory_order_acquire)) break;
        const Record &r = ring_[tail % kSlots];
        call(r.level, r.text);
        tail_.store(++tail, std::memory_order_release);
    }
    if (lost > 0) {
        std::string m = std::to_string(lost) +
                        " log record(s) of the stack thread dropped: the "
                        "log queue was full";
        call(RKNP_LOG_WARN, m.c_str());
    }
}

void LogQueue::run() noexcept {
    block_all_signals();
    for (;;) {
        uint64_t v;
        ssize_t n = ::read(wake_.get(), &v, sizeof v);
        if (n < 0 && errno != EINTR) break; // cannot wait: stop() drains
        {
            std::lock_guard lock(deliver_mu_);
            drain_locked();
        }
        if (stop_.load()) break;
    }
}

} // namespace rknp
