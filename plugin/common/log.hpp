// The caller's log callback; a Logger without one drops messages.
#pragma once

#include <string>

#include "rknp.h"

namespace rknp {

class Logger {
public:
    Logger() = default;
    Logger(rknp_log_fn fn, void *user) : fn_(fn), user_(user) {}

    void log(int32_t level, const std::string &msg) const noexcept {
        if (fn_ != nullptr) fn_(user_, level, msg.c_str());
    }
    void error(const std::string &m) const noexcept { log(RKNP_LOG_ERROR, m); }
    void warn(const std::string &m) const noexcept { log(RKNP_LOG_WARN, m); }
    void info(const std::string &m) const noexcept { log(RKNP_LOG_INFO, m); }
    void debug(const std::string &m) const noexcept { log(RKNP_LOG_DEBUG, m); }

private:
    rknp_log_fn fn_ = nullptr;
    void *user_ = nullptr;
};

} // namespace rknp
