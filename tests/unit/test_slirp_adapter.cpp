// SPDX-License-Identifier: Apache-2.0

// SlirpAdapter: the libslirp version check (which guest-reachable bugs a
// version has) and teardown with frames still queued for the guest.
#include <doctest/doctest.h>

#include "slirp/adapter.hpp"
#include "slirp_rig.hpp"

using namespace rknp;
using namespace tcpsim;

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

// libslirp before 4.8.0 leaks all but the first of a session's frames still
// queued at slirp_cleanup: LeakSanitizer (the asan preset) fails this test
// without SlirpQueueDrain.
TEST_CASE("teardown with frames queued for a guest that never answered ARP") {
    Listener l;
    SlirpRig rig(16, 1000);
    // The guest's SYN: libslirp connects to the listener; its SYN-ACK waits
    // for the guest's MAC (libslirp sends an ARP request, the tap counts it
    // as dropped: none is attached).
    REQUIRE(rig.input(syn_frame(40000, l.port)));
    for (int i = 0; i < 20 && rig.stats.frames_dropped.load() == 0; ++i)
        rig.poll_sockets(50);
    REQUIRE(rig.stats.frames_dropped.load() == 1);
    // A segment beyond the window: libslirp answers with an ACK, queued
    // behind the SYN-ACK of the same session.
    REQUIRE(rig.input(syn_frame(40000, l.port, kAck, 1000 + 0x01000000)));
    uint64_t before = rig.stats.frames_dropped.load();
    rig.slirp.reset();
    // Nothing reached the tap while the queue was emptied.
    CHECK(rig.stats.frames_dropped.load() == before);
}
