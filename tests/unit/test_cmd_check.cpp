// SPDX-License-Identifier: Apache-2.0

// The commands' cmd::check (plugin/cmd/common/rknp_handle.hpp): a failed
// library call's message reaches the user. Written as the commands call
// it, check(rknp_call(..., &err), err, ...): before err was taken by
// reference, the copy could be made before the call filled it, so
// rknp-slirp4netns printed "rknp_parent_start: " and nothing else (seen
// under a memory limit, tests/e2e/faults.sh memory_limit).
#include <doctest/doctest.h>

#include "cmd/common/rknp_handle.hpp"

TEST_CASE("cmd::check: the library's message, in the caller's usual form") {
    rknp_parent *raw = nullptr;
    rknp_error *err = nullptr;
    std::string what;
    try {
        cmd::check(rknp_parent_new(nullptr, &raw, &err), err, "rknp_parent_new");
    } catch (const cmd::Failure &f) {
        what = f.what();
    }
    CHECK(what == "rknp_parent_new: config is NULL");
    CHECK(err == nullptr); // taken and freed by check
    CHECK(raw == nullptr);
}

TEST_CASE("cmd::check: success passes, an error it was given is freed") {
    rknp_error *err = nullptr;
    CHECK_NOTHROW(cmd::check(RKNP_OK, err, "nothing"));
    CHECK(err == nullptr);
}
