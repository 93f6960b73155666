// SPDX-License-Identifier: Apache-2.0

// A start that fails leaves the parent as it was before it: no socket file,
// no logger or stack thread, no fd, the configuration as configured, and a
// later start works. The failure is the stack thread's creation, forced
// through Parent's test seam (std::thread throws std::system_error when
// pthread_create fails, e.g. at RLIMIT_NPROC).
#include <doctest/doctest.h>

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "common/config.hpp"
#include "common/error.hpp"
#include "parent/parent.hpp"
#include "temp_dir.hpp"

using namespace rknp;

namespace {

int count_entries(const char *dir) {
    int n = 0;
    DIR *d = ::opendir(dir);
    REQUIRE(d != nullptr);
    while (dirent *e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
    return n;
}
int threads() { return count_entries("/proc/self/task"); }
int fds() { return count_entries("/proc/self/fd") - 1; } // less opendir's own

struct Lines {
    std::mutex mu;
    std::vector<std::string> lines;
    static void fn(void *u, int32_t, const char *msg) {
        auto *l = static_cast<Lines *>(u);
        std::lock_guard lock(l->mu);
        l->lines.emplace_back(msg);
    }
};

ParentConfig config(Lines *logs) {
    rknp_config c = default_config();
    if (logs != nullptr) {
        c.log_fn = Lines::fn;
        c.log_user_data = logs;
    }
    return ParentConfig::from_c(c);
}

} // namespace

TEST_CASE("a stack thread that cannot be created leaves nothing behind; start works after") {
    Lines logs;
    Lines *log = nullptr;
    SUBCASE("with a log callback (a logger thread)") { log = &logs; }
    SUBCASE("without one") { log = nullptr; }
    TempDir dir;
    const std::string sock = dir.path() + "/rknp.sock";
    // ThreadSanitizer starts a thread of its own at the process's first
    // pthread_create: have that happen before the counts are taken.
    std::thread([] {}).join();
    const int t0 = threads(), f0 = fds();
    {
        int failures = 1;
        Parent p(config(log), [&] {
            if (failures-- > 0)
                throw std::system_error(EAGAIN, std::generic_category(), "pthread_create");
        });
        const uint32_t configured = p.config().max_flows;
        const int t1 = threads(), f1 = fds(); // the wake-up eventfd
        rknp_status code = RKNP_OK;
        std::string what;
        try {
            p.start(dir.path(), 12345);
        } catch (const Error &e) {
            code = e.code();
            what = e.what();
        } catch (const std::exception &e) { // the ABI would say "internal"
            code = RKNP_ERR_INTERNAL;
            what = e.what();
        }
        CHECK(code == RKNP_ERR_SYSTEM);
        CHECK(what == "starting the stack thread: pthread_create: " +
                          std::string(std::strerror(EAGAIN)));
        CHECK(::access(sock.c_str(), F_OK) != 0); // the socket file is gone
        CHECK(threads() == t1);                   // the logger thread too
        CHECK(fds() == f1);                       // and every fd start opened
        CHECK_FALSE(p.started());
        CHECK(p.opaque().empty());
        CHECK(p.config().max_flows == configured);
        CHECK(p.stats().tcp_peek_mode.load() == 0);
        CHECK(p.stats().sandbox.load() == 0);

        // As before the first start: this one works.
        p.start(dir.path(), 12345);
        CHECK(p.started());
        CHECK(::access(sock.c_str(), F_OK) == 0);
        CHECK(threads() == t1 + (log != nullptr ? 2 : 1));
        p.close();
        CHECK(::access(sock.c_str(), F_OK) != 0);
    }
    CHECK(threads() == t0);
    CHECK(fds() == f0);
    if (log != nullptr) {
        std::lock_guard lock(logs.mu);
        CHECK(!logs.lines.empty()); // the successful start's lines
    }
}
