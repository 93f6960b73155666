// SPDX-License-Identifier: Apache-2.0

// The libslirp version check: which guest-reachable bugs a version has.
#include <doctest/doctest.h>

#include "parent/slirp_adapter.hpp"

using namespace rknp;

TEST_CASE("libslirp versions before the fixes are named with their bugs") {
    std::string w = libslirp_bug_warning("4.7.0");
    CHECK(w.rfind("libslirp 4.7.0 has guest-reachable bugs:", 0) == 0);
    CHECK(w.find("fixed in 4.8.0") != std::string::npos);
    CHECK(w.find("fixed in 4.9.2") != std::string::npos);
    w = libslirp_bug_warning("4.9.1");
    CHECK(w.find("4.8.0") == std::string::npos);
    CHECK(w.find("fixed in 4.9.2") != std::string::npos);
    CHECK(libslirp_bug_warning("4.9.2").empty());
    CHECK(libslirp_bug_warning("4.10.0").empty());
    CHECK(libslirp_bug_warning("5.0").empty());
    CHECK_FALSE(libslirp_bug_warning("3.99.99").empty());
}

TEST_CASE("the reassembly-queue guard is for libslirp before 4.8.0 only") {
    CHECK(libslirp_has_reass_loop("4.7.0"));
    CHECK(libslirp_has_reass_loop("4.6.1"));
    CHECK_FALSE(libslirp_has_reass_loop("4.8.0"));
    CHECK_FALSE(libslirp_has_reass_loop("4.9.3"));
}
