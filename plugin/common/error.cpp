// SPDX-License-Identifier: Apache-2.0

// Errors with a status code: construction from errno and validators.
#include "common/error.hpp"

#include <cerrno>
#include <cstring>

namespace rknp {

void throw_errno(const std::string &what, int err) {
    rknp_status code = (err == EPERM || err == EACCES) ? RKNP_ERR_PERMISSION
                                                       : RKNP_ERR_SYSTEM;
    throw Error(code, what + ": " + std::strerror(err));
}

void throw_errno(const std::string &what) { throw_errno(what, errno); }

} // namespace rknp
