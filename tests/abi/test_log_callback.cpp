// SPDX-License-Identifier: Apache-2.0

// Calls back into the library from inside the log callback (rknp.h,
// rknp_log_fn): forwards and queries work, start is refused, close only
// asks the stack to stop, free is refused and the handle stays valid; none
// deadlocks or ends the process, on the calling thread or the logger thread.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../unit/temp_dir.hpp"
#include "parent_rig.hpp"
#include "rknp.h"

using namespace std::chrono_literals;

namespace {

bool has(const char *msg, const std::string &part) {
    return std::string(msg).find(part) != std::string::npos;
}

rknp_parent *new_parent(rknp_log_fn fn, void *user) {
    rknp_config cfg;
    REQUIRE(rknp_config_init(&cfg, sizeof cfg) == RKNP_OK);
    cfg.log_fn = fn;
    cfg.log_user_data = user;
    rknp_parent *p = nullptr;
    REQUIRE(rknp_parent_new(&cfg, &p, nullptr) == RKNP_OK);
    return p;
}

uint32_t listed(rknp_parent *p) {
    uint32_t count = 0;
    CHECK(rknp_parent_list_forwards(p, nullptr, 0, &count, nullptr) == RKNP_OK);
    return count;
}

// Waits up to 5 s for flag.
bool wait_for(const std::atomic<bool> &flag) {
    for (int i = 0; i < 500 && !flag.load(); ++i) std::this_thread::sleep_for(10ms);
    return flag.load();
}

} // namespace

TEST_CASE("the callback may list, add and remove forwards from add_forward's own line") {
    struct Reentry {
        std::atomic<rknp_parent *> p{nullptr};
        std::string trigger; // the outer forward's line
        uint16_t port1 = 0, port2 = 0;
        std::atomic<int> runs{0};
        std::thread::id thread;
        uint32_t before = 0, during = 0, after = 0;
        rknp_status add1 = -1, add2 = -1, rm1 = -1, rm2 = -1, stats = -1;

        static void fn(void *u, int32_t, const char *msg) {
            auto *r = static_cast<Reentry *>(u);
            rknp_parent *p = r->p.load();
            if (p == nullptr || !has(msg, r->trigger) || r->runs++ != 0) return;
            r->thread = std::this_thread::get_id();
            r->before = listed(p);
            // Each add logs its own line: the callback runs again, nested,
            // on this thread; the second add logs after the first's nested
            // callback returned.
            uint32_t id1 = 0, id2 = 0;
            auto f1 = rig::tcp_forward(r->port1), f2 = rig::tcp_forward(r->port2);
            r->add1 = rknp_parent_add_forward(p, &f1, &id1, nullptr);
            r->add2 = rknp_parent_add_forward(p, &f2, &id2, nullptr);
            r->during = listed(p);
            r->rm1 = rknp_parent_remove_forward(p, id1, nullptr);
            r->rm2 = rknp_parent_remove_forward(p, id2, nullptr);
            r->after = listed(p);
            rknp_stats st{};
            st.struct_size = sizeof st;
            r->stats = rknp_parent_stats(p, &st, nullptr);
        }
    } r;
    TempDir dir;
    rknp_parent *p = new_parent(Reentry::fn, &r);
    REQUIRE(rknp_parent_start(p, dir.path().c_str(), rig::not_our_pid(), nullptr) == RKNP_OK);
    const uint16_t port0 = rig::free_port();
    r.port1 = rig::free_port();
    r.port2 = rig::free_port();
    r.trigger = "127.0.0.1:" + std::to_string(port0) + " ->";
    r.p = p;
    rknp_status added = -1;
    std::thread::id adder;
    rig::finishes_within(30s, "rknp_parent_add_forward with a re-entering callback", [&] {
        adder = std::this_thread::get_id();
        auto f0 = rig::tcp_forward(port0);
        uint32_t id0 = 0;
        added = rknp_parent_add_forward(p, &f0, &id0, nullptr);
    });
    CHECK(added == RKNP_OK);
    REQUIRE(r.runs.load() == 1);
    CHECK(r.thread == adder); // the API call's own line, on its thread
    CHECK(r.before == 1);
    CHECK(r.add1 == RKNP_OK);
    CHECK(r.add2 == RKNP_OK);
    CHECK(r.during == 3);
    CHECK(r.rm1 == RKNP_OK);
    CHECK(r.rm2 == RKNP_OK);
    CHECK(r.after == 1);
    CHECK(r.stats == RKNP_OK);
    CHECK(listed(p) == 1);
    r.p = nullptr;
    rknp_parent_free(p);
}

TEST_CASE("threads adding and removing forwards while the callback lists them") {
    // Every forward line runs the callback on the adding thread while the
    // others hold or wait for the forward table.
    struct Lister {
        std::atomic<rknp_parent *> p{nullptr};
        std::atomic<int> lists{0}, failures{0};
        static void fn(void *u, int32_t, const char *msg) {
            auto *l = static_cast<Lister *>(u);
            rknp_parent *p = l->p.load();
            if (p == nullptr || !has(msg, "forward ")) return;
            uint32_t count = 0;
            rknp_forward_info info[4];
            for (auto &i : info) i.struct_size = sizeof i;
            if (rknp_parent_list_forwards(p, info, 4, &count, nullptr) != RKNP_OK)
                l->failures++;
            rknp_stats st{};
            st.struct_size = sizeof st;
            if (rknp_parent_stats(p, &st, nullptr) != RKNP_OK) l->failures++;
            l->lists++;
        }
    } l;
    TempDir dir;
    rknp_parent *p = new_parent(Lister::fn, &l);
    REQUIRE(rknp_parent_start(p, dir.path().c_str(), rig::not_our_pid(), nullptr) == RKNP_OK);
    l.p = p;
    constexpr int kThreads = 4, kRounds = 10;
    std::vector<uint16_t> ports;
    for (int i = 0; i < kThreads; ++i) ports.push_back(rig::free_port());
    std::atomic<int> ok{0};
    rig::finishes_within(60s, "concurrent forwards with a listing callback", [&] {
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t)
            threads.emplace_back([&, t] {
                for (int i = 0; i < kRounds; ++i) {
                    auto f = rig::tcp_forward(ports[size_t(t)]);
                    uint32_t id = 0;
                    if (rknp_parent_add_forward(p, &f, &id, nullptr) == RKNP_OK &&
                        rknp_parent_remove_forward(p, id, nullptr) == RKNP_OK)
                        ok++;
                }
            });
        for (auto &t : threads) t.join();
    });
    CHECK(ok.load() == kThreads * kRounds);
    CHECK(l.lists.load() == kThreads * kRounds);
    CHECK(l.failures.load() == 0);
    l.p = nullptr;
    rknp_parent_free(p);
}

TEST_CASE("rknp_parent_start from the callback fails with STATE, saying why") {
    struct Starter {
        std::atomic<rknp_parent *> p{nullptr};
        std::string dir;
        std::atomic<int> runs{0};
        rknp_status again = -1, other = -1;
        std::string again_msg, other_msg;
        rknp_parent *q = nullptr; // freed outside the callback
        static void fn(void *u, int32_t, const char *msg) {
            auto *s = static_cast<Starter *>(u);
            rknp_parent *p = s->p.load();
            if (p == nullptr || !has(msg, "stack started") || s->runs++ != 0) return;
            rknp_error *err = nullptr;
            s->again = rknp_parent_start(p, s->dir.c_str(), rig::not_our_pid(), &err);
            s->again_msg = rknp_error_message(err);
            rknp_error_free(err);
            // Any parent, not only the one logging: a start that fails
            // stops a logger thread, which may be this one.
            rknp_config cfg;
            rknp_config_init(&cfg, sizeof cfg);
            if (rknp_parent_new(&cfg, &s->q, nullptr) != RKNP_OK) return;
            s->other = rknp_parent_start(s->q, s->dir.c_str(), rig::not_our_pid(), &err);
            s->other_msg = rknp_error_message(err);
            rknp_error_free(err);
        }
    } s;
    TempDir dir;
    s.dir = dir.path();
    rknp_parent *p = new_parent(Starter::fn, &s);
    s.p = p;
    rknp_status started = -1;
    rig::finishes_within(30s, "rknp_parent_start with a callback that starts", [&] {
        started = rknp_parent_start(p, dir.path().c_str(), rig::not_our_pid(), nullptr);
    });
    CHECK(started == RKNP_OK);
    REQUIRE(s.runs.load() == 1);
    const std::string why = "rknp_parent_start called from the log callback: not "
                            "allowed there; call it from outside the callback";
    CHECK(s.again == RKNP_ERR_STATE);
    CHECK(s.again_msg == why);
    CHECK(s.other == RKNP_ERR_STATE);
    CHECK(s.other_msg == why);
    CHECK(rknp_parent_opaque_count(s.q) == 0); // never started
    rknp_parent_free(s.q);
    s.p = nullptr;
    rknp_parent_free(p);
}

TEST_CASE("rknp_parent_close from the callback stops the stack without waiting") {
    struct Closer {
        std::atomic<rknp_parent *> p{nullptr};
        std::atomic<int> runs{0};
        static void fn(void *u, int32_t, const char *msg) {
            auto *c = static_cast<Closer *>(u);
            rknp_parent *p = c->p.load();
            if (p == nullptr || !has(msg, "stack started") || c->runs++ != 0) return;
            rknp_parent_close(p);
        }
    } c;
    TempDir dir;
    rknp_parent *p = new_parent(Closer::fn, &c);
    c.p = p;
    rig::finishes_within(30s, "rknp_parent_start with a callback that closes", [&] {
        CHECK(rknp_parent_start(p, dir.path().c_str(), rig::not_our_pid(), nullptr) ==
              RKNP_OK);
    });
    CHECK(c.runs.load() == 1);
    auto f = rig::tcp_forward(rig::free_port());
    uint32_t id = 0;
    rknp_error *err = nullptr;
    CHECK(rknp_parent_add_forward(p, &f, &id, &err) == RKNP_ERR_STATE);
    CHECK(std::string(rknp_error_message(err)) == "parent is not running");
    rknp_error_free(err);
    rknp_parent_close(p); // joins
    CHECK(access((dir.path() + "/rknp.sock").c_str(), F_OK) != 0);
    c.p = nullptr;
    rknp_parent_free(p);
}

TEST_CASE("rknp_parent_free from the callback is refused; the handle stays valid") {
    struct Freer {
        std::atomic<rknp_parent *> p{nullptr};
        std::string trigger;
        std::atomic<bool> freed_in_callback{false};
        std::thread::id thread;
        std::mutex mu;
        std::vector<std::string> errors;
        rknp_status stats_after = -1;
        static void fn(void *u, int32_t level, const char *msg) {
            auto *f = static_cast<Freer *>(u);
            if (level == RKNP_LOG_ERROR) {
                std::lock_guard lock(f->mu);
                f->errors.emplace_back(msg);
            }
            rknp_parent *p = f->p.load();
            if (p == nullptr || !has(msg, f->trigger) || f->freed_in_callback.load())
                return;
            f->thread = std::this_thread::get_id();
            rknp_parent_free(p); // returns; p is still ours
            rknp_stats st{};
            st.struct_size = sizeof st;
            f->stats_after = rknp_parent_stats(p, &st, nullptr);
            f->freed_in_callback = true;
        }
        size_t refusals() {
            std::lock_guard lock(mu);
            size_t n = 0;
            for (auto &e : errors) n += e.find("rknp_parent_free called from the log callback") == 0;
            return n;
        }
    };
    const std::string refused_line =
        "rknp_parent_free called from the log callback: not freed (the parent was "
        "asked to stop, as rknp_parent_close from there does); call "
        "rknp_parent_free again from outside the callback";
    TempDir dir;

    SUBCASE("on the thread of an API call that logs") {
        Freer f;
        f.trigger = "stack started";
        rknp_parent *p = new_parent(Freer::fn, &f);
        f.p = p;
        rig::finishes_within(30s, "rknp_parent_start with a callback that frees", [&] {
            CHECK(rknp_parent_start(p, dir.path().c_str(), rig::not_our_pid(), nullptr) ==
                  RKNP_OK);
        });
        REQUIRE(f.freed_in_callback.load());
        CHECK(f.stats_after == RKNP_OK);
        CHECK(f.refusals() == 1);
        CHECK(rknp_parent_opaque_count(p) > 0);
        auto fw = rig::tcp_forward(rig::free_port());
        uint32_t id = 0;
        CHECK(rknp_parent_add_forward(p, &fw, &id, nullptr) == RKNP_ERR_STATE);
        f.p = nullptr;
        rknp_parent_free(p); // now it is freed (LeakSanitizer checks)
        CHECK(access((dir.path() + "/rknp.sock").c_str(), F_OK) != 0);
        {
            std::lock_guard lock(f.mu);
            REQUIRE(!f.errors.empty());
            CHECK(f.errors[0] == refused_line);
        }
    }
    SUBCASE("on the logger thread, delivering the stack thread's records") {
        Freer f;
        f.trigger = "hand-over refused";
        rknp_parent *p = new_parent(Freer::fn, &f);
        REQUIRE(rknp_parent_start(p, dir.path().c_str(), rig::not_our_pid(), nullptr) ==
                RKNP_OK);
        f.p = p;
        // We are not the child: the stack thread refuses us and logs it.
        int s = rig::connect_unix(dir.path() + "/rknp.sock");
        REQUIRE(s >= 0);
        CHECK(wait_for(f.freed_in_callback));
        ::close(s);
        CHECK(f.thread != std::this_thread::get_id());
        CHECK(f.stats_after == RKNP_OK);
        rknp_stats st{};
        st.struct_size = sizeof st;
        CHECK(rknp_parent_stats(p, &st, nullptr) == RKNP_OK);
        CHECK(st.handovers_refused == 1);
        f.p = nullptr;
        rknp_parent_free(p);
        CHECK(f.refusals() == 1);
    }
}
