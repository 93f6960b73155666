// SPDX-License-Identifier: Apache-2.0

// Errors with a status code: construction from errno and validators.
#include "common/error.hpp"

#include <cerrno>
#include <cstring>
#include <new>

namespace rknp {

void throw_errno(const std::string &what, int err) {
    rknp_status code = (err == EPERM || err == EACCES) ? RKNP_ERR_PERMISSION
                                                       : RKNP_ERR_SYSTEM;
    throw Error(code, what + ": " + std::strerror(err));
}

void throw_errno(const std::string &what) { throw_errno(what, errno); }

ErrorRecord current_error() noexcept {
    try {
        try {
            throw;
        } catch (const Error &e) {
            return {e.code(), e.what()};
        } catch (const std::bad_alloc &) {
            return {RKNP_ERR_SYSTEM, "out of memory"};
        } catch (const std::exception &e) {
            return {RKNP_ERR_INTERNAL, std::string("internal: ") + e.what()};
        } catch (...) {
            return {RKNP_ERR_INTERNAL, "internal: unknown exception"};
        }
    } catch (...) { // copying the message ran out of memory
        return {RKNP_ERR_SYSTEM, "out of memory"}; // short: no allocation
    }
}

} // namespace rknp
