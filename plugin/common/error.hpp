// SPDX-License-Identifier: Apache-2.0

// Internal error type: thrown inside the core, converted to rknp_error at the
// C ABI boundary (abi.cpp) so no exception ever crosses it.
#pragma once

#include <stdexcept>
#include <string>

#include "rknp.h"

namespace rknp {

class Error : public std::runtime_error {
public:
    Error(rknp_status code, const std::string &msg)
        : std::runtime_error(msg), code_(code) {}
    rknp_status code() const { return code_; }

private:
    rknp_status code_;
};

// Error for a failed OS call: "<what>: <strerror(errno)>".
[[noreturn]] void throw_errno(const std::string &what, int err);
[[noreturn]] void throw_errno(const std::string &what);

[[noreturn]] inline void throw_invalid(const std::string &msg) {
    throw Error(RKNP_ERR_INVALID_ARGUMENT, msg);
}

// An error as plain data: what the C ABI reports, and what one thread hands
// to another. A std::exception_ptr would share the exception object and
// libstdc++'s reference-counted message between the threads, and the last
// one to drop it frees it in code ThreadSanitizer cannot see.
struct ErrorRecord {
    rknp_status code;
    std::string message;
};

// The exception being handled as an ErrorRecord (call it in a catch block):
// Error keeps its code; out of memory is RKNP_ERR_SYSTEM; anything else is
// RKNP_ERR_INTERNAL, "internal: <what>".
ErrorRecord current_error() noexcept;

} // namespace rknp
