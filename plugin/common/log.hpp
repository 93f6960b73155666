// SPDX-License-Identifier: Apache-2.0

// The caller's log callback, reached directly or through a LogQueue; a
// Logger without a callback drops messages.
#pragma once

#include <string>

#include "rknp.h"

namespace rknp {

class LogQueue;

class Logger {
public:
    Logger() = default;
    // Calls fn on the logging thread.
    Logger(rknp_log_fn fn, void *user) : fn_(fn), user_(user) {}
    // Records go into q and reach its callback on q's logger thread: for
    // the stack thread (the single producer), which must never run the
    // caller's code (Go, in rootlesskit).
    static Logger queued(LogQueue &q) { return Logger(&q, true); }
    // Calls q's callback on the logging thread, after what q holds, so
    // that records keep their order.
    static Logger through(LogQueue &q) { return Logger(&q, false); }

    void log(int32_t level, const std::string &msg) const noexcept;
    void error(const std::string &m) const noexcept { log(RKNP_LOG_ERROR, m); }
    void warn(const std::string &m) const noexcept { log(RKNP_LOG_WARN, m); }
    void info(const std::string &m) const noexcept { log(RKNP_LOG_INFO, m); }
    void debug(const std::string &m) const noexcept { log(RKNP_LOG_DEBUG, m); }

    rknp_log_fn fn() const { return fn_; }
    void *user() const { return user_; }

private:
    Logger(LogQueue *q, bool queued) : queue_(q), queued_(queued) {}

    rknp_log_fn fn_ = nullptr;
    void *user_ = nullptr;
    LogQueue *queue_ = nullptr;
    bool queued_ = false;
};

} // namespace rknp
