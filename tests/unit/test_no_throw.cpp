// SPDX-License-Identifier: Apache-2.0

// The exception boundaries of the stack thread and of libslirp's callbacks
// (common/no_throw.hpp): whatever is thrown, bad_alloc and non-std types
// included, stops there, is logged, and the caller carries on.
#include <doctest/doctest.h>

#include <new>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/no_throw.hpp"

using namespace rknp;

namespace {

struct Lines {
    std::vector<std::pair<int32_t, std::string>> all;
    static void fn(void *u, int32_t level, const char *msg) {
        static_cast<Lines *>(u)->all.emplace_back(level, msg);
    }
};

} // namespace

TEST_CASE("nothing thrown at the stack thread's top gets past it") {
    Lines lines;
    Logger log(Lines::fn, &lines);
    const char *ctx = "stack thread stopped, the network is down";
    // Each of these would reach std::terminate (and end rootlesskit)
    // through a boundary that catches only rknp::Error.
    CHECK_FALSE(run_catching_all(log, ctx, [] { throw std::bad_alloc(); }));
    CHECK_FALSE(run_catching_all(log, ctx, [] {
        throw Error(RKNP_ERR_INTERNAL, "a bug");
    }));
    CHECK_FALSE(run_catching_all(log, ctx, [] { throw 42; }));
    CHECK(run_catching_all(log, ctx, [] {}));
    REQUIRE(lines.all.size() == 3);
    CHECK(lines.all[0] == std::pair<int32_t, std::string>(
                              RKNP_LOG_ERROR, std::string(ctx) + ": std::bad_alloc"));
    CHECK(lines.all[1].second == std::string(ctx) + ": a bug");
    CHECK(lines.all[2].second ==
          std::string(ctx) + ": an exception that is not a std::exception");
}

TEST_CASE("callbacks from C return their fallback instead of unwinding") {
    CHECK(or_on_throw(-1, []() -> int { throw std::bad_alloc(); }) == -1);
    CHECK(or_on_throw<void *>(nullptr, []() -> void * { throw 1; }) == nullptr);
    CHECK(or_on_throw(-1, [] { return 7; }) == 7);
    static_assert(noexcept(or_on_throw(0, [] { return 0; })));
}
