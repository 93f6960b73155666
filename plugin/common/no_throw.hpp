// SPDX-License-Identifier: Apache-2.0

// Where exceptions must stop. rknp runs inside rootlesskit: an exception
// leaving the stack thread ends the whole process (std::terminate), and one
// unwinding through libslirp's C frames is undefined behaviour. The stack
// thread's top runs under run_catching_all; every function libslirp calls
// returns through or_on_throw.
#pragma once

#include <exception>
#include <string>

#include "common/log.hpp"

namespace rknp {

// Logs "<context>: <what>" at error level; never throws (a message that
// cannot be built is logged as context alone).
inline void log_exception(const Logger &log, const char *context,
                          const char *what) noexcept {
    try {
        log.error(std::string(context) + ": " + what);
    } catch (...) {
        log.error(context);
    }
}

// Runs body; whatever it throws is logged with context and stops there.
// Returns whether body returned normally.
template <class F>
bool run_catching_all(const Logger &log, const char *context, F &&body) noexcept {
    try {
        body();
        return true;
    } catch (const std::exception &e) {
        log_exception(log, context, e.what());
    } catch (...) {
        log_exception(log, context, "an exception that is not a std::exception");
    }
    return false;
}

// body's result, or fallback if it threw (for callbacks from C, which
// cannot take an exception).
template <class R, class F> R or_on_throw(R fallback, F &&body) noexcept {
    try {
        return body();
    } catch (...) {
        return fallback;
    }
}

} // namespace rknp
