// SPDX-License-Identifier: Apache-2.0

// RAII wrappers over the public rknp C ABI: the parent handle, its errors
// and a check that turns a failed call into a Failure.
#pragma once

#include <memory>
#include <string>

#include "errors.hpp"
#include "rknp.h"

namespace cmd {

struct ErrorFree {
    void operator()(rknp_error *e) const { rknp_error_free(e); }
};
using ErrorPtr = std::unique_ptr<rknp_error, ErrorFree>;

struct ParentFree {
    void operator()(rknp_parent *p) const { rknp_parent_free(p); }
};
using ParentPtr = std::unique_ptr<rknp_parent, ParentFree>;

// Throws Failure("what: <rknp message>") unless st is RKNP_OK; takes
// ownership of err either way.
inline void check(rknp_status st, rknp_error *err, const std::string &what) {
    ErrorPtr owned(err);
    if (st != RKNP_OK)
        throw Failure(what + ": " + rknp_error_message(owned.get()));
}

} // namespace cmd
