// SPDX-License-Identifier: Apache-2.0

// Peers the hand-over socket refuses decide how often the parent logs: a
// flood of them is counted in full but reaches the log as a few lines.
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../unit/temp_dir.hpp"
#include "parent_rig.hpp"
#include "rknp.h"

namespace {

struct Lines {
    std::mutex mu;
    std::vector<std::pair<int32_t, std::string>> lines;
    static void fn(void *u, int32_t level, const char *msg) {
        auto *l = static_cast<Lines *>(u);
        std::lock_guard lock(l->mu);
        l->lines.emplace_back(level, msg);
    }
    size_t count(const std::string &prefix, int32_t level) {
        std::lock_guard lock(mu);
        size_t n = 0;
        for (auto &[lv, m] : lines) n += lv == level && m.rfind(prefix, 0) == 0;
        return n;
    }
    size_t containing(const std::string &part) {
        std::lock_guard lock(mu);
        size_t n = 0;
        for (auto &[lv, m] : lines) n += m.find(part) != std::string::npos;
        return n;
    }
};

} // namespace

TEST_CASE("3000 refused hand-over peers: all counted, at most a burst of log lines") {
    TempDir dir;
    Lines logs;
    rknp_config cfg;
    REQUIRE(rknp_config_init(&cfg, sizeof cfg) == RKNP_OK);
    cfg.log_fn = Lines::fn;
    cfg.log_user_data = &logs;
    rknp_parent *p = nullptr;
    REQUIRE(rknp_parent_new(&cfg, &p, nullptr) == RKNP_OK);
    REQUIRE(rknp_parent_start(p, dir.path().c_str(), rig::not_our_pid(), nullptr) ==
            RKNP_OK);
    const std::string sock = dir.path() + "/rknp.sock";
    constexpr uint64_t kTries = 3000;
    // We are not the child: each connection is refused at its accept.
    for (uint64_t i = 0; i < kTries; ++i) {
        int s = rig::connect_unix(sock);
        REQUIRE(s >= 0);
        ::close(s);
    }
    rknp_stats st{};
    st.struct_size = sizeof st;
    for (int i = 0; i < 6000; ++i) {
        REQUIRE(rknp_parent_stats(p, &st, nullptr) == RKNP_OK);
        if (st.handovers_refused == kTries) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(st.handovers_refused == kTries);
    rknp_parent_close(p); // delivers every record the stack thread queued
    // 10 a minute; the test takes seconds (a slow sanitizer run may cross
    // into a second minute).
    const size_t refused = logs.count("hand-over refused: peer pid", RKNP_LOG_ERROR);
    CHECK(refused >= 10);
    CHECK(refused <= 20);
    // The moment the lines stop is logged, once per minute at most.
    const size_t notices = logs.count(
        "hand-over refusals: more than 10 in 60 s; further ones are counted "
        "(rknp_stats.handovers_refused) and logged at most that often",
        RKNP_LOG_ERROR);
    CHECK(notices >= 1);
    CHECK(notices <= 2);
    // Nothing else was lost on the way (the log queue holds 256 records).
    CHECK(logs.containing("log record(s) of the stack thread dropped") == 0);
    rknp_parent_free(p);
}
