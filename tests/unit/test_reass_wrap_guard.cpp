// SPDX-License-Identifier: Apache-2.0

// The guard against libslirp 4.7.0's reassembly-queue loop: which guest
// segments it holds back, and, against the real libslirp in a child
// process, that an upload whose out-of-order data ends at sequence 0 no
// longer hangs or crashes the stack and arrives whole.
#include <doctest/doctest.h>
#include <slirp/libslirp.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include "common/config.hpp"
#include "common/stats.hpp"
#include "datapath/coalescer.hpp"
#include "slirp/reass_wrap_guard.hpp"
#include "datapath/tap_io.hpp"
#include "slirp/guest_sockets.hpp"
#include "slirp/poll_set.hpp"
#include "slirp/adapter.hpp"
#include "tcp_sim_guest.hpp"

using namespace tcpsim;

namespace {

struct WrapFlow {
    uint8_t guest[16], gw[16];
    WrapFlow() {
        addr4(guest, 10, 0, 2, 100);
        addr4(gw, 10, 0, 2, 2);
    }
    Bytes from_guest(uint8_t flags, uint32_t seq, size_t len) const {
        Bytes d(len, 0x5a);
        return guest_frame(false, guest, gw, 40000, 80, flags, seq, 1, 65535,
                           d.data(), d.size());
    }
    // libslirp's segment to the guest acknowledging rcv_nxt.
    Bytes from_slirp(uint8_t flags, uint32_t rcv_nxt) const {
        return guest_frame(false, gw, guest, 80, 40000, flags, 1, rcv_nxt,
                           65535, nullptr, 0);
    }
};

} // namespace

TEST_CASE("out-of-order data near sequence 0 is held back, the rest passes") {
    ReassWrapGuard g;
    WrapFlow f;
    const uint32_t near = 0u - 3000;
    // No ACK from libslirp known yet: only segments near 0 are held back.
    CHECK(g.allow(f.from_guest(kAck, 500000, 1000)));
    CHECK_FALSE(g.allow(f.from_guest(kAck, near, 1000)));
    CHECK_FALSE(g.allow(f.from_guest(kAck, 100, 1000)));
    CHECK(g.allow(f.from_guest(kSyn, near, 0)));

    g.from_slirp(f.from_slirp(kAck, near));
    CHECK(g.allow(f.from_guest(kAck, near, 1000)));        // in order
    CHECK(g.allow(f.from_guest(kAck, near, 3000)));        // in order, ends at 0
    CHECK(g.allow(f.from_guest(kAck, near + 1000, 0)));    // a pure ACK
    CHECK_FALSE(g.allow(f.from_guest(kAck, near + 1000, 2000))); // ends at 0
    CHECK_FALSE(g.allow(f.from_guest(kAck, near + 1000, 500)));  // short of 0
    CHECK_FALSE(g.allow(f.from_guest(kAck, 10, 500)));           // past 0

    // Far from the wrap, out-of-order data is libslirp's to queue.
    g.from_slirp(f.from_slirp(kAck, 1000000));
    CHECK(g.allow(f.from_guest(kAck, 1003000, 1000)));
    // Past 0 and more than two windows on: an ordinary flow again.
    g.from_slirp(f.from_slirp(kAck, ReassWrapGuard::kZone + 1));
    CHECK(g.allow(f.from_guest(kAck, ReassWrapGuard::kZone + 5000, 100)));
}

TEST_CASE("after libslirp's FIN, data that reaches 0 is held back even in order") {
    ReassWrapGuard g;
    WrapFlow f;
    const uint32_t far = 0u - 1000000;
    g.from_slirp(f.from_slirp(kAck | kFin, far));
    CHECK(g.allow(f.from_guest(kAck, far, 1000)));
    g.from_slirp(f.from_slirp(kAck | kFin, 0u - 1000));
    CHECK_FALSE(g.allow(f.from_guest(kAck, 0u - 1000, 1000)));
    CHECK_FALSE(g.allow(f.from_guest(kAck | kFin, 0u - 1000, 999)));
    CHECK(g.allow(f.from_guest(kAck, 0u - 1000, 500)));
}

namespace {

int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Drives a real libslirp through SlirpAdapter with a socketpair as the tap:
// a guest uploads to a loopback listener through the gateway, its ISN
// chosen so that the data crosses sequence 0, sending the part that ends
// exactly at 0 first (out of order). Runs in a child: on libslirp 4.7.0
// without the guard the stack thread loops or crashes. Returns the exit
// status.
int upload_child(int tap_fd, int guest_fd);

int upload_across_the_wrap() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return 10;
    pid_t pid = ::fork();
    if (pid == 0) ::_exit(upload_child(sv[0], sv[1]));
    ::close(sv[1]);
    ::close(sv[0]);
    int status = 0;
    for (int i = 0; i < 200; ++i) { // 20 s
        if (::waitpid(pid, &status, WNOHANG) == pid) return status;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return -1;
}

// The child's side: no doctest macros, only an exit code.
int upload_child(int tap_fd, int guest_fd) {
    Listener lis;
    ParentConfig cfg = ParentConfig::from_c(default_config());
    Stats stats;
    TapIo tap(stats);
    tap.attach(UniqueFd(tap_fd), false);
    Coalescer coalescer(tap, stats);
    PollSet polls;
    SlirpAdapter slirp(cfg, tap, coalescer, polls, [](bool) { return Admission::Accept; });
    auto pump = [&](int rounds) {
        for (int i = 0; i < rounds; ++i) {
            uint32_t timeout = 5;
            slirp.before_wait(timeout);
            polls.wait(int(std::min<uint32_t>(timeout, 5))); // collects
            slirp.after_wait(false, false);
            slirp.run_timers(now_ms());
            coalescer.flush();
        }
    };
    auto send = [&](const Bytes &f) {
        (void)slirp.guest_frame(f);
        pump(3);
    };
    // ARP so that libslirp knows the guest's MAC.
    Bytes arp(42, 0);
    std::memset(arp.data(), 0xff, 6);
    std::memcpy(arp.data() + 6, kGuestMac, 6);
    put16(arp.data() + 12, 0x0806);
    uint8_t *a = arp.data() + 14;
    put16(a, 1), put16(a + 2, 0x0800), a[4] = 6, a[5] = 4, put16(a + 6, 1);
    std::memcpy(a + 8, kGuestMac, 6);
    a[14] = 10, a[15] = 0, a[16] = 2, a[17] = 100;
    a[24] = 10, a[25] = 0, a[26] = 2, a[27] = 2;
    send(arp);

    WrapFlow f;
    const uint32_t isn = 0u - 3001; // data from 0u - 3000 to 0
    auto seg = [&](uint8_t flags, uint32_t seq, uint32_t ack, const Bytes &d) {
        return guest_frame(false, f.guest, f.gw, 40000, lis.port, flags, seq,
                           ack, 65535, d.data(), d.size());
    };
    send(seg(kSyn, isn, 0, {}));
    // The SYN-ACK, once libslirp's connect to the listener completed.
    uint32_t server_isn = 0;
    bool synack = false;
    for (int i = 0; i < 400 && !synack; ++i) {
        pump(1);
        uint8_t buf[2048];
        ssize_t n;
        while ((n = ::recv(guest_fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
            Segment s;
            if (parse_segment({buf, size_t(n)}, s) == Parse::Ok &&
                (s.flags & (kSyn | kAck)) == (kSyn | kAck)) {
                server_isn = s.seq;
                synack = true;
            }
        }
    }
    if (!synack) return 11;
    int conn = -1;
    for (int i = 0; i < 200 && conn < 0; ++i) {
        pump(1);
        conn = lis.try_accept();
    }
    if (conn < 0) return 12;
    Bytes data = pattern(3000, 7);
    Bytes first(data.begin(), data.begin() + 1000), rest(data.begin() + 1000, data.end());
    send(seg(kAck, isn + 1, server_isn + 1, {}));
    send(seg(kAck | kPsh, isn + 1001, server_isn + 1, rest)); // ends at 0
    send(seg(kAck | kPsh, isn + 1, server_isn + 1, first));   // fills the gap
    // What a guest does when its out-of-order segment got no ACK: send it
    // again, now in order.
    send(seg(kAck | kPsh, isn + 1001, server_isn + 1, rest));
    Bytes got;
    for (int i = 0; i < 400 && got.size() < data.size(); ++i) {
        pump(1);
        drain(conn, got);
    }
    ::close(conn);
    return got == data ? 0 : 13;
}

} // namespace

TEST_CASE("libslirp survives an upload whose out-of-order data ends at sequence 0") {
    int status = upload_across_the_wrap();
    INFO("libslirp ", std::string(slirp_version_string()), ", child status ", status);
    REQUIRE(status != -1); // -1: the stack looped until killed
    CHECK_FALSE(WIFSIGNALED(status));
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0); // 13: bytes lost or changed
}
