// SPDX-License-Identifier: Apache-2.0

// LogQueue: the stack thread's records reach the callback on another
// thread, in order, a full ring drops and reports instead of blocking, and
// stop() delivers everything queued.
#include <doctest/doctest.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/log.hpp"
#include "common/log_queue.hpp"

using namespace rknp;

namespace {

struct Seen {
    std::mutex mu;
    std::condition_variable cv;
    bool hold = false; // the callback waits while set
    std::vector<std::pair<int32_t, std::string>> records;
    std::vector<std::thread::id> threads;

    static void fn(void *u, int32_t level, const char *msg) {
        auto *s = static_cast<Seen *>(u);
        std::unique_lock lock(s->mu);
        s->cv.wait(lock, [s] { return !s->hold; });
        s->records.emplace_back(level, msg);
        s->threads.push_back(std::this_thread::get_id());
    }
};

} // namespace

TEST_CASE("queued records reach the callback in order, never on the producer") {
    Seen seen;
    LogQueue q(Seen::fn, &seen);
    q.start();
    std::thread::id producer;
    std::thread t([&] {
        producer = std::this_thread::get_id();
        Logger log = Logger::queued(q);
        for (int i = 0; i < 100; ++i) log.info("record " + std::to_string(i));
    });
    t.join();
    // An API thread's message comes after everything queued before it.
    Logger::through(q).warn("from the caller");
    q.stop();
    REQUIRE(seen.records.size() == 101);
    for (int i = 0; i < 100; ++i) {
        CHECK(seen.records[i].second == "record " + std::to_string(i));
        CHECK(seen.records[i].first == RKNP_LOG_INFO);
        CHECK(seen.threads[i] != producer);
    }
    CHECK(seen.records[100].second == "from the caller");
    CHECK(seen.threads[100] == std::this_thread::get_id());
}

TEST_CASE("a full ring drops and reports, without blocking the producer") {
    Seen seen;
    seen.hold = true; // the caller's callback is stuck
    LogQueue q(Seen::fn, &seen);
    q.start();
    Logger log = Logger::queued(q);
    // Returns although nothing is delivered: push never waits.
    for (size_t i = 0; i < LogQueue::kSlots + 10; ++i)
        log.debug("r" + std::to_string(i));
    CHECK(q.dropped() == 10);
    {
        std::lock_guard lock(seen.mu);
        seen.hold = false;
    }
    seen.cv.notify_all();
    q.stop();
    REQUIRE(seen.records.size() == LogQueue::kSlots + 1);
    CHECK(seen.records[0].second == "r0");
    CHECK(seen.records[LogQueue::kSlots - 1].second ==
          "r" + std::to_string(LogQueue::kSlots - 1));
    CHECK(seen.records.back().first == RKNP_LOG_WARN);
    CHECK(seen.records.back().second.find("10 log record(s)") == 0);
}

TEST_CASE("records queued without a running logger thread are delivered by stop") {
    Seen seen;
    LogQueue q(Seen::fn, &seen);
    Logger::queued(q).error("early");
    CHECK(seen.records.empty());
    q.stop();
    REQUIRE(seen.records.size() == 1);
    CHECK(seen.records[0].second == "early");
}

TEST_CASE("long records are cut, marked and terminated") {
    Seen seen;
    LogQueue q(Seen::fn, &seen);
    Logger::queued(q).info(std::string(2000, 'x'));
    q.stop();
    REQUIRE(seen.records.size() == 1);
    const std::string &m = seen.records[0].second;
    CHECK(m.size() == LogQueue::kTextBytes - 1);
    CHECK(m.substr(m.size() - 3) == "...");
}
