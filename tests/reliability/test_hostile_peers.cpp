// SPDX-License-Identifier: Apache-2.0

// Hostile hand-over peers against a parent started through the public
// library: malformed hand-overs from a peer that passes the credential
// check, another process, a peer without the child token, a silent peer.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "misuse_rig.hpp"

using namespace misuse;

namespace {

// The parent's reply as "<status> <message>" (plugin/handover.cpp:
// "RKNR", status u32 LE, length u16 LE, message), or what was wrong with it.
std::string reply(rknp_status status, const std::string &message) {
    return std::to_string(status) + " " + message;
}
std::string decode_reply(const uint8_t *b, ssize_t n) {
    if (n <= 0) return "no reply";
    if (n < 10 || std::memcmp(b, "RKNR", 4) != 0) return "malformed reply";
    uint32_t status = b[4] | b[5] << 8 | b[6] << 16 | uint32_t(b[7]) << 24;
    size_t len = size_t(b[8] | b[9] << 8);
    if (len != size_t(n) - 10) return "reply length mismatch";
    return reply(rknp_status(status), std::string(reinterpret_cast<const char *>(b) + 10, len));
}

// Connects to the hand-over socket.
int connect_to(const std::string &sock) {
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strcpy(a.sun_path, sock.c_str());
    REQUIRE(connect(s, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
    return s;
}

// The parent's first message on s: "greeting" (24 bytes, "RKNG"), or the
// decoded reply it sent instead. Waits up to 5 s.
std::string first_message(int s) {
    pollfd pf{s, POLLIN, 0};
    uint8_t buf[512];
    ssize_t n = poll(&pf, 1, 5000) == 1 ? recv(s, buf, sizeof buf, 0) : -1;
    if (n == 24 && std::memcmp(buf, "RKNG", 4) == 0) return "greeting";
    return decode_reply(buf, n);
}

// A hand-over peer: connects, reads the parent's greeting, sends msg with
// fds, returns the reply (waits up to 5 s, longer than the parent waits
// for a hello). A peer refused at once returns that reply.
std::string hand_over(const std::string &sock, const void *msg, size_t len,
                      const std::vector<int> &fds_to_send) {
    int s = connect_to(sock);
    if (std::string first = first_message(s); first != "greeting") {
        close(s);
        return first;
    }
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)] = {};
    iovec iov{const_cast<void *>(msg), len};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (!fds_to_send.empty()) {
        mh.msg_control = control;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * fds_to_send.size());
        cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds_to_send.size());
        std::memcpy(CMSG_DATA(c), fds_to_send.data(), sizeof(int) * fds_to_send.size());
    }
    if (len > 0 || !fds_to_send.empty()) (void)sendmsg(s, &mh, MSG_NOSIGNAL);
    pollfd pf{s, POLLIN, 0};
    uint8_t buf[512];
    ssize_t n = poll(&pf, 1, 5000) == 1 ? recv(s, buf, sizeof buf, 0) : -1;
    close(s);
    return decode_reply(buf, n);
}

// The child token from the parent's opaque pairs, as bytes.
std::vector<uint8_t> child_token(rknp_parent *p) {
    std::vector<uint8_t> t;
    for (uint32_t i = 0; i < rknp_parent_opaque_count(p); ++i) {
        const char *k, *v;
        REQUIRE(rknp_parent_opaque_get(p, i, &k, &v, nullptr) == RKNP_OK);
        if (std::string(k) != "rknp.child_token") continue;
        for (size_t j = 0; v[j] != 0 && v[j + 1] != 0; j += 2)
            t.push_back(uint8_t(std::stoi(std::string(v + j, 2), nullptr, 16)));
    }
    REQUIRE(t.size() == 16);
    return t;
}

// A version 2 hello: "RKNH", version, name, the child token.
std::vector<uint8_t> hello(const char *name, const std::vector<uint8_t> &token) {
    std::vector<uint8_t> h(40, 0);
    std::memcpy(h.data(), "RKNH", 4);
    h[4] = 2; // version 2, little-endian
    std::memcpy(h.data() + 8, name, std::strlen(name));
    std::memcpy(h.data() + 24, token.data(), token.size());
    return h;
}

// The parent's stats once handovers_refused is `refused` (the stack
// thread counts a refusal just after its reply goes out), or after 1 s.
rknp_stats stats_once_refused(rknp_parent *p, uint64_t refused) {
    rknp_stats st{};
    st.struct_size = sizeof st;
    for (int i = 0; i < 100; ++i) {
        REQUIRE(rknp_parent_stats(p, &st, nullptr) == RKNP_OK);
        if (st.handovers_refused == refused) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return st;
}

} // namespace

TEST_CASE("a peer that passes the credential check but sends garbage is refused") {
    TempDir dir;
    Logs logs;
    // child_pid is our own pid: our connections pass SO_PEERCRED.
    rknp_parent *p = started(dir, getpid(), &logs);
    std::string sock = dir.path() + "/rknp.sock";
    int f0 = fds();
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    auto h = hello("tap0", child_token(p));

    const std::string not_tap =
        reply(RKNP_ERR_PROTOCOL, "hand-over: the fd is not a tun/tap device");
    const std::string truncated =
        reply(RKNP_ERR_PROTOCOL, "hand-over: message or control data truncated");

    CHECK(hand_over(sock, h.data(), h.size(), {}) ==
          reply(RKNP_ERR_PROTOCOL, "hand-over: hello carried no file descriptor"));
    CHECK(hand_over(sock, h.data(), h.size(), {devnull}) == not_tap);
    int tun = open("/dev/net/tun", O_RDWR | O_CLOEXEC); // not attached to a device
    if (tun >= 0) {
        CHECK(hand_over(sock, h.data(), h.size(), {tun}) == not_tap);
        close(tun);
    }
    // Surplus fds the parent reads are closed: the first one is judged.
    CHECK(hand_over(sock, h.data(), h.size(), {devnull, devnull, devnull}) == not_tap);
    // More than its control buffer takes (4): refused as truncated, and
    // the kernel closes what did not fit.
    std::vector<int> many(8, devnull);
    CHECK(hand_over(sock, h.data(), h.size(), many) == truncated);
    std::vector<uint8_t> junk(200, 0xAB);
    CHECK(hand_over(sock, junk.data(), junk.size(), {devnull}) == truncated);
    auto bad = h;
    bad[0] = 'X';
    CHECK(hand_over(sock, bad.data(), bad.size(), {devnull}) ==
          reply(RKNP_ERR_PROTOCOL, "hand-over: bad magic"));
    auto unterminated = h;
    std::memset(unterminated.data() + 8, 'a', 16);
    CHECK(hand_over(sock, unterminated.data(), unterminated.size(), {devnull}) ==
          reply(RKNP_ERR_PROTOCOL, "hand-over: interface name not terminated"));
    // A peer that connects and says nothing: told after the parent's 2 s.
    CHECK(hand_over(sock, nullptr, 0, {}) ==
          reply(RKNP_ERR_TIMEOUT, "hand-over: timed out waiting for the child's hello"));
    // One that hangs up at once cannot be told; the log says why.
    {
        int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::strcpy(a.sun_path, sock.c_str());
        REQUIRE(connect(s, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
        close(s);
        CHECK(logs.wait_for("hand-over: the peer hung up before its hello", RKNP_LOG_ERROR));
    }
    // Still listening after all that.
    CHECK(hand_over(sock, h.data(), h.size(), {devnull}) == not_tap);
    close(devnull);

    rknp_stats st{};
    st.struct_size = sizeof st;
    REQUIRE(rknp_parent_stats(p, &st, nullptr) == RKNP_OK);
    CHECK(st.tap_attached == 0);
    CHECK(logs.wait_for("hand-over: the fd is not a tun/tap device"));
    // The stack thread closes a refused fd just after replying.
    for (int i = 0; i < 100 && fds() != f0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK(fds() == f0); // every fd the parent received was closed
    rknp_parent_free(p);
}

TEST_CASE("a hand-over from another process is refused and logged; the socket keeps working") {
    TempDir dir;
    Logs logs;
    rknp_parent *p = started(dir, getpid(), &logs);
    std::string sock = dir.path() + "/rknp.sock";
    pid_t other = fork();
    if (other == 0) {
        // Not the child: refused at accept with PERMISSION, whatever it sends.
        int devnull = open("/dev/null", O_RDONLY);
        std::vector<uint8_t> no_token(16, 0);
        auto h = hello("tap0", no_token);
        std::string r = hand_over(sock, h.data(), h.size(), {devnull});
        std::string uid = std::to_string(getuid());
        std::string want = reply(RKNP_ERR_PERMISSION,
                                 "hand-over refused: peer pid " + std::to_string(getpid()) +
                                     " uid " + uid + " is not the child (pid " +
                                     std::to_string(getppid()) + " uid " + uid + ")");
        if (r != want) std::fprintf(stderr, "reply \"%s\", want \"%s\"\n", r.c_str(), want.c_str());
        _exit(r == want ? 0 : 1);
    }
    int status = 0;
    waitpid(other, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    const rknp_stats st = stats_once_refused(p, 1);
    CHECK(st.handovers_refused == 1);
    CHECK(st.tap_attached == 0);
    // The stack thread's records reach the callback through the logger
    // thread: a little after the counter.
    const std::string refused = "hand-over refused: peer pid " + std::to_string(other);
    CHECK(logs.wait_for(refused, RKNP_LOG_ERROR));
    // The real child (us) is still heard.
    auto h = hello("tap0", child_token(p));
    CHECK(hand_over(sock, h.data(), h.size(), {}) ==
          reply(RKNP_ERR_PROTOCOL, "hand-over: hello carried no file descriptor"));
    rknp_parent_free(p);
}

TEST_CASE("a hand-over without the child token is refused and counted") {
    TempDir dir;
    Logs logs;
    // Our own pid passes SO_PEERCRED: only the token tells us apart.
    rknp_parent *p = started(dir, getpid(), &logs);
    std::string sock = dir.path() + "/rknp.sock";
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    auto wrong = child_token(p);
    wrong[0] ^= 1;
    const std::string refused = reply(
        RKNP_ERR_PERMISSION,
        "hand-over refused: the peer did not prove it is the child (wrong token)");
    CHECK(hand_over(sock, hello("tap0", wrong).data(), 40, {devnull}) == refused);
    CHECK(hand_over(sock, hello("tap0", std::vector<uint8_t>(16, 0)).data(), 40,
                    {devnull}) == refused);
    close(devnull);
    const rknp_stats st = stats_once_refused(p, 2);
    CHECK(st.handovers_refused == 2);
    CHECK(st.tap_attached == 0);
    CHECK(logs.wait_for("wrong token", RKNP_LOG_ERROR));
    rknp_parent_free(p);
}

TEST_CASE("a peer that connects and says nothing does not hold up the child") {
    TempDir dir;
    Logs logs;
    rknp_parent *p = started(dir, getpid(), &logs);
    std::string sock = dir.path() + "/rknp.sock";
    int silent = connect_to(sock);
    REQUIRE(first_message(silent) == "greeting");
    // The child comes after the silent peer and is answered at once ...
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    auto h = hello("tap0", child_token(p));
    CHECK(hand_over(sock, h.data(), h.size(), {devnull}) ==
          reply(RKNP_ERR_PROTOCOL, "hand-over: the fd is not a tun/tap device"));
    close(devnull);
    // ... while the silent peer still waits for its deadline: nothing is
    // queued for it yet (a parent that waited on it first would have
    // answered it before the child).
    uint8_t buf[64];
    CHECK(recv(silent, buf, sizeof buf, MSG_DONTWAIT) < 0);
    CHECK(errno == EAGAIN);
    // Then it is told, and counted.
    CHECK(first_message(silent) ==
          reply(RKNP_ERR_TIMEOUT, "hand-over: timed out waiting for the child's hello"));
    close(silent);
    const rknp_stats st = stats_once_refused(p, 2); // counted just after the reply
    CHECK(st.handovers_refused == 2);
    rknp_parent_free(p);
}
