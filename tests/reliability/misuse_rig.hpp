// SPDX-License-Identifier: Apache-2.0

// What the reliability ABI tests share: counting this process's threads
// and fds, collecting the parent's log lines, and a parent started with
// the default configuration (test_misuse.cpp, test_hostile_peers.cpp).
#pragma once

#include <doctest/doctest.h>

#include <dirent.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../unit/temp_dir.hpp"
#include "rknp.h"

namespace misuse {

inline int count_dir(const char *path) {
    int n = 0;
    DIR *d = opendir(path);
    REQUIRE(d != nullptr);
    while (dirent *e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
    return n - (std::strcmp(path, "/proc/self/fd") == 0 ? 1 : 0);
}
inline int threads() { return count_dir("/proc/self/task"); }
inline int fds() { return count_dir("/proc/self/fd"); }

struct Logs {
    std::mutex mu;
    std::vector<std::pair<int32_t, std::string>> lines;
    static void fn(void *u, int32_t level, const char *msg) {
        auto *self = static_cast<Logs *>(u);
        std::lock_guard lock(self->mu);
        self->lines.emplace_back(level, msg);
    }
    // Whether a line containing part was logged (at level, unless -1).
    bool has(const std::string &part, int32_t level = -1) {
        std::lock_guard lock(mu);
        for (auto &[l, msg] : lines)
            if ((level < 0 || l == level) && msg.find(part) != std::string::npos)
                return true;
        return false;
    }
    // The same, waiting up to 2 s: records reach the callback through the
    // library's logger thread, after the reply or counter that caused them.
    bool wait_for(const std::string &part, int32_t level = -1) {
        for (int i = 0; i < 200; ++i) {
            if (has(part, level)) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return has(part, level);
    }
};

inline rknp_config config(Logs *logs = nullptr) {
    rknp_config c;
    REQUIRE(rknp_config_init(&c, sizeof c) == RKNP_OK);
    if (logs != nullptr) {
        c.log_fn = Logs::fn;
        c.log_user_data = logs;
    }
    return c;
}

inline rknp_parent *started(const TempDir &dir, pid_t child, Logs *logs = nullptr) {
    auto c = config(logs);
    rknp_parent *p = nullptr;
    REQUIRE(rknp_parent_new(&c, &p, nullptr) == RKNP_OK);
    REQUIRE(rknp_parent_start(p, dir.path().c_str(), child, nullptr) == RKNP_OK);
    return p;
}

} // namespace misuse
