// SPDX-License-Identifier: Apache-2.0

// The guard against libslirp 4.7.0's reassembly-queue loop: which guest
// segments it holds back, and, against the real libslirp in a child
// process, that uploads whose data ends at or passes sequence 0 (out of
// order; in order after the host's FIN) neither hang nor crash the stack
// and arrive whole.
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

TEST_CASE("after libslirp's FIN, data that ends at 0 is held back even in order") {
    ReassWrapGuard g;
    WrapFlow f;
    const uint32_t far = 0u - 1000000;
    g.from_slirp(f.from_slirp(kAck | kFin, far));
    CHECK(g.allow(f.from_guest(kAck, far, 1000)));
    g.from_slirp(f.from_slirp(kAck | kFin, 0u - 1000));
    CHECK_FALSE(g.allow(f.from_guest(kAck, 0u - 1000, 1000)));
    CHECK_FALSE(g.allow(f.from_guest(kAck | kFin, 0u - 1000, 999)));
    CHECK(g.allow(f.from_guest(kAck, 0u - 1000, 500)));
    // Passing 0 is safe (libslirp's rcv_nxt lands past it) and must pass:
    // the guest's retransmissions would cross 0 the same way.
    CHECK(g.allow(f.from_guest(kAck, 0u - 1000, 2000)));
    CHECK(g.allow(f.from_guest(kAck | kFin, 0u - 1000, 1500)));
}

namespace {

int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// A child process driving a real libslirp through SlirpAdapter, with a
// socketpair as the tap: a guest (this code) connects through the gateway
// to a loopback listener, its ISN chosen so that its data crosses
// sequence 0. On libslirp 4.7.0 without the guard the stack thread loops
// or crashes there. The child's exit status is the verdict: 0 when the
// listener got every byte in order, 11-13 otherwise.
class WrapRig {
public:
    WrapRig(int tap_fd, int guest_fd)
        : guest_fd_(guest_fd), cfg_(ParentConfig::from_c(default_config())), tap_(stats_),
          coalescer_(tap_, stats_),
          slirp_(cfg_, tap_, coalescer_, polls_, [](bool) { return Admission::Accept; }) {
        tap_.attach(UniqueFd(tap_fd), false);
    }
    ~WrapRig() {
        if (conn_ >= 0) ::close(conn_);
    }

    void pump(int rounds) {
        for (int i = 0; i < rounds; ++i) {
            uint32_t timeout = 5;
            slirp_.before_wait(timeout);
            polls_.wait(int(std::min<uint32_t>(timeout, 5))); // collects
            slirp_.after_wait(false, false);
            slirp_.run_timers(now_ms());
            coalescer_.flush();
        }
    }
    void send(const Bytes &f) {
        (void)slirp_.guest_frame(f);
        pump(3);
    }
    Bytes seg(uint8_t flags, uint32_t seq, const Bytes &d) const {
        return guest_frame(false, flow_.guest, flow_.gw, 40000, lis_.port, flags, seq,
                           rcv_nxt_, 65535, d.data(), d.size());
    }
    // The guest's segments libslirp sent since the last call (the guest
    // acknowledges none of them by itself).
    std::vector<Segment> from_slirp() {
        std::vector<Segment> out;
        uint8_t buf[2048];
        ssize_t n;
        while ((n = ::recv(guest_fd_, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
            Segment s;
            if (parse_segment({buf, size_t(n)}, s) == Parse::Ok) out.push_back(s);
        }
        return out;
    }
    // ARP, SYN, SYN-ACK, the listener's accept and the guest's ACK, with
    // the guest's ISN isn. 0, or the exit status of what failed.
    int connect(uint32_t isn) {
        Bytes arp(42, 0);
        std::memset(arp.data(), 0xff, 6);
        std::memcpy(arp.data() + 6, kGuestMac, 6);
        put16(arp.data() + 12, 0x0806);
        uint8_t *a = arp.data() + 14;
        put16(a, 1), put16(a + 2, 0x0800), a[4] = 6, a[5] = 4, put16(a + 6, 1);
        std::memcpy(a + 8, kGuestMac, 6);
        a[14] = 10, a[15] = 0, a[16] = 2, a[17] = 100;
        a[24] = 10, a[25] = 0, a[26] = 2, a[27] = 2;
        send(arp); // so that libslirp knows the guest's MAC
        send(seg(kSyn, isn, {}));
        bool synack = false;
        for (int i = 0; i < 400 && !synack; ++i) {
            pump(1); // the SYN-ACK, once libslirp's connect completed
            for (const Segment &s : from_slirp())
                if ((s.flags & (kSyn | kAck)) == (kSyn | kAck)) {
                    rcv_nxt_ = s.seq + 1;
                    synack = true;
                }
        }
        if (!synack) return 11;
        for (int i = 0; i < 200 && conn_ < 0; ++i) {
            pump(1);
            conn_ = lis_.try_accept();
        }
        if (conn_ < 0) return 12;
        send(seg(kAck, isn + 1, {}));
        return 0;
    }
    // The host's side stops sending: libslirp's FIN reaches the guest,
    // which acknowledges it. 0, or 14 if no FIN came.
    int host_fin() {
        ::shutdown(conn_, SHUT_WR);
        for (int i = 0; i < 400; ++i) {
            pump(1);
            for (const Segment &s : from_slirp())
                if (s.flags & kFin) {
                    rcv_nxt_ = s.seq + 1;
                    return 0;
                }
        }
        return 14;
    }
    // 0 if the listener reads exactly want, else 13.
    int host_reads(const Bytes &want) {
        Bytes got;
        for (int i = 0; i < 400 && got.size() < want.size(); ++i) {
            pump(1);
            drain(conn_, got);
        }
        return got == want ? 0 : 13;
    }

private:
    int guest_fd_;
    Listener lis_;
    ParentConfig cfg_;
    Stats stats_;
    TapIo tap_;
    Coalescer coalescer_;
    PollSet polls_;
    SlirpAdapter slirp_;
    WrapFlow flow_;
    uint32_t rcv_nxt_ = 0; // what the guest acknowledges
    int conn_ = -1;
};

// Runs child(tap_fd, guest_fd) in a child process (20 s at most); its
// exit status, or -1 if it was still running (the stack looped).
int in_child(int (*child)(int, int)) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return 10;
    pid_t pid = ::fork();
    if (pid == 0) ::_exit(child(sv[0], sv[1]));
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

// Out of order: the part that ends exactly at 0 first, then the gap, then
// (what a guest does when its out-of-order segment got no ACK) the first
// part again, in order. No doctest macros in the children: exit codes.
int ooo_upload_to_zero(int tap_fd, int guest_fd) {
    WrapRig rig(tap_fd, guest_fd);
    const uint32_t isn = 0u - 3001; // data from 0u - 3000 to 0
    if (int rc = rig.connect(isn)) return rc;
    Bytes data = pattern(3000, 7);
    Bytes first(data.begin(), data.begin() + 1000), rest(data.begin() + 1000, data.end());
    rig.send(rig.seg(kAck | kPsh, isn + 1001, rest)); // ends at 0
    rig.send(rig.seg(kAck | kPsh, isn + 1, first));   // fills the gap
    rig.send(rig.seg(kAck | kPsh, isn + 1001, rest));
    return rig.host_reads(data);
}

// After the host's FIN (libslirp in FIN_WAIT_2 takes all data through its
// reassembly code), an upload in order whose second segment passes 0.
int upload_across_zero_after_host_fin(int tap_fd, int guest_fd) {
    WrapRig rig(tap_fd, guest_fd);
    const uint32_t isn = 0u - 3001; // data from 0u - 3000 to 1000
    if (int rc = rig.connect(isn)) return rc;
    if (int rc = rig.host_fin()) return rc;
    Bytes data = pattern(4000, 9);
    Bytes first(data.begin(), data.begin() + 2000), second(data.begin() + 2000, data.end());
    rig.send(rig.seg(kAck | kPsh, isn + 1, first));
    rig.send(rig.seg(kAck | kPsh, isn + 2001, second)); // passes 0
    return rig.host_reads(data);
}

} // namespace

TEST_CASE("libslirp survives an upload whose out-of-order data ends at sequence 0") {
    int status = in_child(ooo_upload_to_zero);
    INFO("libslirp ", std::string(slirp_version_string()), ", child status ", status);
    REQUIRE(status != -1); // -1: the stack looped until killed
    CHECK_FALSE(WIFSIGNALED(status));
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0); // 13: bytes lost or changed
}

TEST_CASE("after the host's FIN, an upload that passes sequence 0 arrives whole") {
    // The guard once held back every segment reaching or passing 0 after
    // libslirp's FIN: this upload stalled for good (13: bytes missing).
    int status = in_child(upload_across_zero_after_host_fin);
    INFO("libslirp ", std::string(slirp_version_string()), ", child status ", status);
    REQUIRE(status != -1);
    CHECK_FALSE(WIFSIGNALED(status));
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}
