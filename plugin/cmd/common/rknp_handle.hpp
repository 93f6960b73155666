// SPDX-License-Identifier: Apache-2.0

// RAII wrappers over the public rknp C ABI: the parent handle, its errors,
// a check that turns a failed call into a Failure, and a parent made with
// its network read back.
#pragma once

#include <memory>
#include <string>
#include <utility>

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
// ownership of err either way (and clears it). err by reference: in
// check(rknp_call(..., &err), err, ...) the arguments are evaluated in no
// set order, so a copy could be taken before the call fills it (then the
// message was empty and the error leaked).
inline void check(rknp_status st, rknp_error *&err, const std::string &what) {
    ErrorPtr owned(std::exchange(err, nullptr));
    if (st != RKNP_OK)
        throw Failure(what + ": " + rknp_error_message(owned.get()));
}

// rknp_parent_new(cfg) and rknp_parent_network into *net (struct_size
// set here); throws Failure naming the call that failed.
inline ParentPtr new_parent(const rknp_config &cfg, rknp_network &net) {
    rknp_parent *raw = nullptr;
    rknp_error *err = nullptr;
    check(rknp_parent_new(&cfg, &raw, &err), err, "rknp_parent_new");
    ParentPtr parent(raw);
    net = rknp_network{};
    net.struct_size = sizeof net;
    check(rknp_parent_network(parent.get(), &net, &err), err,
          "rknp_parent_network");
    return parent;
}

} // namespace cmd
