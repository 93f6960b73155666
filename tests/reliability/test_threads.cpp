// SPDX-License-Identifier: Apache-2.0

// The stack thread against concurrent callers, on the public ABI, as root
// in a fresh network namespace without a user namespace (so it runs under
// TSan, whose runtime thread makes unshare(CLONE_NEWUSER) fail): a real tap
// handed over by rknp_child_configure in this process, traffic both ways
// through the stack (guest -> 10.0.2.2 -> a loopback echo server, and a
// host client -> a forward -> an echo server on the guest side), while four
// threads add, remove and list forwards and read stats; then a close from
// another thread with those calls in flight. Asserts what a caller sees:
// every status, the listed forwards, the ports bound, the bytes echoed.
// Not root: exit 77 (ctest SKIP).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../unit/temp_dir.hpp"
#include "rknp.h"

namespace {

// The namespace is ours alone; these sit below the ephemeral port range.
constexpr uint16_t kEchoPort = 20000;   // host loopback echo server
constexpr uint16_t kFwdPort = 20001;    // stable forward, host side
constexpr uint16_t kGuestPort = 20002;  // its guest side (echo server)
constexpr uint16_t kHammerBase = 21000; // thread t uses base + 64 t + k
constexpr int kHammers = 4, kSlots = 16;
constexpr size_t kBytes = 4 << 20; // at least, per direction and path

int count_dir(const char *path) {
    int n = 0;
    DIR *d = opendir(path);
    if (d == nullptr) return -1;
    while (dirent *e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}
int threads() { return count_dir("/proc/self/task"); }
int fds() { return count_dir("/proc/self/fd") - 1; } // minus opendir's

// Failures seen on worker threads, checked on the main thread (doctest's
// assertions are kept off the racing threads).
struct Problems {
    std::mutex mu;
    std::vector<std::string> list;
    void expect(bool ok, const std::string &what) {
        if (ok) return;
        std::lock_guard lock(mu);
        if (list.size() < 20) list.push_back(what);
    }
};

sockaddr_in addr4(const char *ip, uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

void timeouts(int s) {
    timeval tv{60, 0}; // a stuck stack fails the test instead of hanging it
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

int listener(const char *ip, uint16_t port) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a = addr4(ip, port);
    REQUIRE(bind(s, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
    REQUIRE(listen(s, 4) == 0);
    return s;
}

// Whether 127.0.0.1:port of type is bound (by the stack's forward).
bool port_taken(int type, uint16_t port) {
    int s = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    sockaddr_in a = addr4("127.0.0.1", port);
    bool taken = bind(s, reinterpret_cast<sockaddr *>(&a), sizeof a) < 0;
    close(s);
    return taken;
}

// Accepts one connection on ls and echoes it until EOF.
void echo_one(int ls, Problems &pr) {
    int c = accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
    close(ls);
    pr.expect(c >= 0, "echo server: accept failed");
    if (c < 0) return;
    timeouts(c);
    std::vector<char> buf(65536);
    for (ssize_t n; (n = read(c, buf.data(), buf.size())) > 0;)
        for (ssize_t off = 0, w; off < n; off += w)
            if ((w = write(c, buf.data() + off, size_t(n - off))) <= 0) {
                pr.expect(false, "echo server: write failed");
                close(c);
                return;
            }
    close(c);
}

uint8_t pattern(size_t k) { return uint8_t(k * 131 + k / 251 + 7); }

// Connects to ip:port and sends the pattern (at least kBytes, and until
// enough) while reading it back: every byte compared, all of them back
// before the EOF that answers our shutdown.
void echo_client(const char *ip, uint16_t port, const std::string &path,
                 const std::atomic<bool> &enough, Problems &pr) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeouts(s);
    sockaddr_in a = addr4(ip, port);
    if (connect(s, reinterpret_cast<sockaddr *>(&a), sizeof a) < 0) {
        pr.expect(false, path + ": connect: " + std::strerror(errno));
        close(s);
        return;
    }
    size_t sent = 0;
    std::thread writer([&] {
        std::vector<uint8_t> buf(65536);
        while (sent < kBytes || !enough.load()) {
            size_t n = buf.size();
            for (size_t i = 0; i < n; ++i) buf[i] = pattern(sent + i);
            ssize_t w = write(s, buf.data(), n);
            if (w <= 0) {
                pr.expect(false, path + ": write failed at " + std::to_string(sent));
                break;
            }
            sent += size_t(w);
        }
        shutdown(s, SHUT_WR);
    });
    std::vector<uint8_t> buf(65536);
    size_t got = 0;
    bool bad = false; // reported once; the rest is still read and counted
    for (ssize_t n; (n = read(s, buf.data(), buf.size())) > 0; got += size_t(n))
        for (ssize_t i = 0; i < n && !bad; ++i)
            if (buf[size_t(i)] != pattern(got + size_t(i))) {
                pr.expect(false, path + ": byte " + std::to_string(got + size_t(i)) +
                                     " differs");
                bad = true;
            }
    writer.join();
    close(s);
    pr.expect(got == sent && sent >= kBytes, path + ": " + std::to_string(got) + " of " +
                                                 std::to_string(sent) + " bytes echoed");
}

rknp_forward forward(uint16_t host_port, uint16_t guest_port, bool udp) {
    rknp_forward f;
    rknp_forward_init(&f, sizeof f);
    f.protocol = udp ? RKNP_PROTO_UDP : RKNP_PROTO_TCP;
    f.host_addr = "127.0.0.1";
    f.host_port = host_port;
    f.guest_port = guest_port;
    return f;
}

// What close does to a call depends on when it ran: before close started
// (the running result), after close returned (the closed result), or
// overlapping (either).
enum class Phase { Running, Overlap, Closed };

struct Closing {
    std::atomic<bool> started{false}, done{false};
    template <class F> Phase around(F &&call) {
        bool closed_before = done.load();
        call();
        if (closed_before) return Phase::Closed;
        if (!started.load()) return Phase::Running;
        overlaps.fetch_add(1);
        return Phase::Overlap;
    }
    std::atomic<int> overlaps{0}; // calls that ran while close ran
};

// Thread t cycles through its slots: add (TCP on even slots, UDP on odd),
// then on the next pass a duplicate add and the remove; lists and stats
// in between. Until stop, and for 20 rounds after the close.
void hammer(int t, rknp_parent *p, uint32_t stable_id, Closing &cl,
            std::atomic<bool> &stop, std::atomic<int> &rounds, Problems &pr) {
    std::set<uint32_t> own_ids;
    uint32_t ids[kSlots] = {};
    bool held[kSlots] = {};
    rknp_stats last{};
    std::vector<rknp_forward_info> info(256);
    int closed_rounds = 0;
    for (int i = 0; !stop.load() || closed_rounds < 20; ++i) {
        int k = i % kSlots;
        uint16_t port = uint16_t(kHammerBase + 64 * t + k);
        bool udp = k % 2 == 1;
        int type = udp ? SOCK_DGRAM : SOCK_STREAM;
        auto f = forward(port, uint16_t(30000 + 64 * t + k), udp);
        std::string at = "thread " + std::to_string(t) + " port " + std::to_string(port) + ": ";
        rknp_status s;
        uint32_t id = 0;
        if (!held[k]) {
            // The port is checked inside around(): a close starting right
            // after the add would unbind it, and the call would no longer
            // count as Running.
            bool bound = false;
            Phase ph = cl.around([&] {
                s = rknp_parent_add_forward(p, &f, &id, nullptr);
                bound = s == RKNP_OK && port_taken(type, port);
            });
            if (ph == Phase::Running) {
                pr.expect(s == RKNP_OK, at + "add: " + std::to_string(s) + ", want OK");
                pr.expect(s != RKNP_OK || bound, at + "added but not bound");
            } else if (ph == Phase::Closed) {
                pr.expect(s == RKNP_ERR_STATE, at + "add after close: " + std::to_string(s));
            } else {
                pr.expect(s == RKNP_OK || s == RKNP_ERR_STATE,
                          at + "add racing close: " + std::to_string(s));
            }
            if (s == RKNP_OK) {
                pr.expect(own_ids.insert(id).second, at + "id reused: " + std::to_string(id));
                ids[k] = id;
                held[k] = true;
            }
        } else {
            Phase ph = cl.around([&] { s = rknp_parent_add_forward(p, &f, &id, nullptr); });
            pr.expect(ph == Phase::Running ? s == RKNP_ERR_INVALID_ARGUMENT
                      : ph == Phase::Closed ? s == RKNP_ERR_STATE
                      : s == RKNP_ERR_INVALID_ARGUMENT || s == RKNP_ERR_STATE,
                      at + "duplicate add: " + std::to_string(s));
            ph = cl.around([&] { s = rknp_parent_remove_forward(p, ids[k], nullptr); });
            pr.expect(ph == Phase::Running ? s == RKNP_OK
                      : ph == Phase::Closed ? s == RKNP_ERR_STATE
                      : s == RKNP_OK || s == RKNP_ERR_STATE,
                      at + "remove: " + std::to_string(s));
            if (ph == Phase::Running && s == RKNP_OK)
                pr.expect(!port_taken(type, port), at + "removed but still bound");
            held[k] = false;
        }
        // An unknown id: INVALID_ARGUMENT while running.
        Phase ph = cl.around([&] { s = rknp_parent_remove_forward(p, 0xfffffff0u, nullptr); });
        pr.expect(ph == Phase::Running ? s == RKNP_ERR_INVALID_ARGUMENT
                  : ph == Phase::Closed ? s == RKNP_ERR_STATE
                  : s == RKNP_ERR_INVALID_ARGUMENT || s == RKNP_ERR_STATE,
                  at + "remove of an unknown id: " + std::to_string(s));

        // The list: our forwards exactly as added; everyone's consistent.
        for (auto &e : info) e.struct_size = sizeof e;
        uint32_t count = 0;
        ph = cl.around([&] {
            s = rknp_parent_list_forwards(p, info.data(), uint32_t(info.size()), &count, nullptr);
        });
        pr.expect(s == RKNP_OK, at + "list: " + std::to_string(s));
        if (ph == Phase::Closed) pr.expect(count == 0, at + "forwards listed after close");
        pr.expect(count <= 1 + kHammers * kSlots, at + "list count " + std::to_string(count));
        std::set<uint32_t> listed;
        for (uint32_t j = 0; j < std::min<uint32_t>(count, 256); ++j) {
            const auto &e = info[j];
            listed.insert(e.id);
            bool stable = e.host_port == kFwdPort;
            int slot = int(e.host_port) - kHammerBase;
            pr.expect(std::strcmp(e.host_addr, "127.0.0.1") == 0 &&
                          std::strcmp(e.guest_addr, "10.0.2.100") == 0 &&
                          (stable ? e.guest_port == kGuestPort && e.protocol == RKNP_PROTO_TCP
                                  : slot >= 0 && slot < 64 * kHammers && slot % 64 < kSlots &&
                                        e.guest_port == uint32_t(30000 + slot) &&
                                        e.protocol == uint32_t(slot % 2 ? RKNP_PROTO_UDP
                                                                        : RKNP_PROTO_TCP)),
                      at + "listed forward " + std::to_string(e.id) + " is not one added");
        }
        if (ph == Phase::Running) {
            pr.expect(listed.count(stable_id) == 1, at + "the stable forward is not listed");
            for (int j = 0; j < kSlots; ++j)
                pr.expect(!held[j] || listed.count(ids[j]) == 1,
                          at + "own forward " + std::to_string(ids[j]) + " not listed");
        }

        rknp_stats st{};
        st.struct_size = sizeof st;
        ph = cl.around([&] { s = rknp_parent_stats(p, &st, nullptr); });
        pr.expect(s == RKNP_OK, at + "stats: " + std::to_string(s));
        if (ph != Phase::Overlap)
            pr.expect(st.tap_attached == (ph == Phase::Running ? 1u : 0u),
                      at + "tap_attached " + std::to_string(st.tap_attached));
        pr.expect(st.frames_from_tap >= last.frames_from_tap &&
                      st.bytes_from_tap >= last.bytes_from_tap &&
                      st.frames_to_tap >= last.frames_to_tap &&
                      st.bytes_to_tap >= last.bytes_to_tap,
                  at + "a counter went backwards");
        last = st;
        if (ph == Phase::Closed) ++closed_rounds;
        rounds.fetch_add(1);
    }
}

// The child side, in this process: child_pid is getpid().
void configure_child(rknp_parent *p) {
    std::vector<rknp_kv> kv(rknp_parent_opaque_count(p));
    for (uint32_t i = 0; i < kv.size(); ++i)
        REQUIRE(rknp_parent_opaque_get(p, i, &kv[i].key, &kv[i].value, nullptr) == RKNP_OK);
    char dev[16] = "";
    rknp_error *err = nullptr;
    rknp_status s = rknp_child_configure(kv.data(), uint32_t(kv.size()), nullptr, dev,
                                         sizeof dev, &err);
    std::string msg = rknp_error_message(err);
    rknp_error_free(err);
    INFO(msg);
    REQUIRE(s == RKNP_OK);
    CHECK(std::string(dev) == "tap0");
}

} // namespace

TEST_CASE("forwards, lists and stats from four threads while traffic crosses the "
          "stack, then a close with those calls in flight") {
    std::thread([] {}).join(); // TSan starts its runtime thread with the first one
    int t0 = threads(), f0 = fds();
    TempDir dir;
    rknp_config cfg;
    REQUIRE(rknp_config_init(&cfg, sizeof cfg) == RKNP_OK);
    rknp_parent *p = nullptr;
    REQUIRE(rknp_parent_new(&cfg, &p, nullptr) == RKNP_OK);
    REQUIRE(rknp_parent_start(p, dir.path().c_str(), getpid(), nullptr) == RKNP_OK);
    configure_child(p);
    rknp_stats st{};
    st.struct_size = sizeof st;
    REQUIRE(rknp_parent_stats(p, &st, nullptr) == RKNP_OK);
    REQUIRE(st.tap_attached == 1);
    auto fw = forward(kFwdPort, kGuestPort, false);
    uint32_t fw_id = 0;
    REQUIRE(rknp_parent_add_forward(p, &fw, &fw_id, nullptr) == RKNP_OK);

    Problems pr;
    Closing cl;
    std::atomic<bool> stop{false}, enough{false};
    std::atomic<int> rounds{0};
    // Guest -> gateway -> host loopback, and host -> forward -> guest.
    int host_ls = listener("127.0.0.1", kEchoPort), guest_ls = listener("10.0.2.100", kGuestPort);
    std::vector<std::thread> traffic;
    traffic.emplace_back(echo_one, host_ls, std::ref(pr));
    traffic.emplace_back(echo_one, guest_ls, std::ref(pr));
    traffic.emplace_back(echo_client, "10.0.2.2", kEchoPort, "guest -> 10.0.2.2",
                         std::cref(enough), std::ref(pr));
    traffic.emplace_back(echo_client, "127.0.0.1", kFwdPort, "host -> forward",
                         std::cref(enough), std::ref(pr));
    std::vector<std::thread> hammers;
    for (int t = 0; t < kHammers; ++t)
        hammers.emplace_back(hammer, t, p, fw_id, std::ref(cl), std::ref(stop),
                             std::ref(rounds), std::ref(pr));
    // Traffic flows for as long as the hammering before the close.
    while (rounds.load() < kHammers * 2 * kSlots)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    enough.store(true);
    for (auto &t : traffic) t.join();
    REQUIRE(rknp_parent_stats(p, &st, nullptr) == RKNP_OK);
    CHECK(st.bytes_from_tap >= 2 * kBytes); // both echoes crossed the tap both ways
    CHECK(st.bytes_to_tap >= 2 * kBytes);
    int rounds_running = rounds.load();

    double close_ms = 0;
    std::thread closer([&] {
        auto c0 = std::chrono::steady_clock::now();
        cl.started.store(true);
        rknp_parent_close(p);
        cl.done.store(true);
        std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - c0;
        close_ms = took.count();
    });
    closer.join();
    stop.store(true);
    for (auto &t : hammers) t.join();
    for (auto &msg : pr.list) FAIL_CHECK(msg);
    MESSAGE(rounds_running << " rounds while running, " << rounds.load() << " in all, "
                           << cl.overlaps.load() << " calls overlapping the close ("
                           << close_ms << " ms); " << st.bytes_from_tap + st.bytes_to_tap
                           << " bytes across the tap");

    CHECK(if_nametoindex("tap0") == 0); // the parent's tap fd is closed: the device is gone
    CHECK(rknp_parent_remove_forward(p, fw_id, nullptr) == RKNP_ERR_STATE);
    CHECK(threads() == t0); // the stack thread is gone
    rknp_parent_free(p);
    CHECK(fds() == f0); // sockets, tap, eventfd: nothing left
}

int main(int argc, char **argv) {
    if (geteuid() != 0) {
        std::puts("needs root (a network namespace and a tap): skipped");
        return 77;
    }
    // Before any thread: all later threads (the stack thread too) are in it.
    if (unshare(CLONE_NEWNET) != 0) {
        std::perror("unshare(CLONE_NEWNET)");
        return 1;
    }
    doctest::Context ctx(argc, argv);
    return ctx.run();
}
