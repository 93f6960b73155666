// SPDX-License-Identifier: Apache-2.0

// Port forwarding through the C ABI on a running parent (no child needed:
// the host side of a forward is a listening socket of the stack thread).
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../unit/temp_dir.hpp"
#include "common/fd_passing.hpp" // test plumbing only: header-only
#include "rknp.h"

namespace {

// Binds a socket of type to 127.0.0.1:port; returns the fd or -1.
int bind_local(int type, uint16_t port) {
    int s = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    if (bind(s, reinterpret_cast<sockaddr *>(&a), sizeof a) < 0) {
        close(s);
        return -1;
    }
    return s;
}

uint16_t free_port() {
    int s = bind_local(SOCK_STREAM, 0);
    sockaddr_in a{};
    socklen_t len = sizeof a;
    getsockname(s, reinterpret_cast<sockaddr *>(&a), &len);
    close(s);
    return ntohs(a.sin_port);
}

bool port_taken(int type, uint16_t port) {
    int s = bind_local(type, port);
    if (s >= 0) close(s);
    return s < 0;
}

struct Running {
    TempDir dir;
    rknp_parent *p = nullptr;
    explicit Running(uint8_t tcp_path = RKNP_TCP_PATH_DEFAULT, bool ipv6 = false) {
        rknp_config cfg;
        rknp_config_init(&cfg, sizeof cfg);
        cfg.tcp_path = tcp_path;
        cfg.enable_ipv6 = ipv6;
        REQUIRE(rknp_parent_new(&cfg, &p, nullptr) == RKNP_OK);
        REQUIRE(rknp_parent_start(p, dir.path().c_str(), 12345, nullptr) ==
                RKNP_OK);
    }
    ~Running() { rknp_parent_free(p); }
};

rknp_forward tcp(uint32_t host_port, uint32_t guest_port = 80,
                 const char *host = "127.0.0.1") {
    rknp_forward f;
    rknp_forward_init(&f, sizeof f);
    f.host_addr = host;
    f.host_port = host_port;
    f.guest_port = guest_port;
    return f;
}

std::string add_error(rknp_parent *p, const rknp_forward &f,
                      rknp_status want) {
    uint32_t id = 0;
    rknp_error *err = nullptr;
    CHECK(rknp_parent_add_forward(p, &f, &id, &err) == want);
    std::string msg = rknp_error_message(err);
    rknp_error_free(err);
    return msg;
}

} // namespace

// The TCP fast path owns TCP forwards' listeners itself (where the kernel
// supports it); both paths must look the same from outside.
uint8_t tcp_path_case() {
    uint8_t path = RKNP_TCP_PATH_SLIRP;
    SUBCASE("libslirp") { path = RKNP_TCP_PATH_SLIRP; }
    SUBCASE("fast path") { path = RKNP_TCP_PATH_FAST; }
    return path;
}

TEST_CASE("add, list and remove TCP and UDP forwards") {
    Running r(tcp_path_case());
    uint16_t tport = free_port(), uport = free_port();
    uint32_t tid = 0, uid = 0;
    auto t = tcp(tport, 8080);
    REQUIRE(rknp_parent_add_forward(r.p, &t, &tid, nullptr) == RKNP_OK);
    CHECK(port_taken(SOCK_STREAM, tport));
    auto u = tcp(uport, 5353);
    u.protocol = RKNP_PROTO_UDP;
    REQUIRE(rknp_parent_add_forward(r.p, &u, &uid, nullptr) == RKNP_OK);
    CHECK(port_taken(SOCK_DGRAM, uport));
    CHECK(tid != uid);

    uint32_t count = 0;
    REQUIRE(rknp_parent_list_forwards(r.p, nullptr, 0, &count, nullptr) ==
            RKNP_OK);
    REQUIRE(count == 2);
    std::vector<rknp_forward_info> list(2);
    for (auto &i : list) i.struct_size = sizeof i;
    REQUIRE(rknp_parent_list_forwards(r.p, list.data(), 2, &count, nullptr) ==
            RKNP_OK);
    CHECK(list[0].id == tid);
    CHECK(list[0].protocol == RKNP_PROTO_TCP);
    CHECK(std::string(list[0].host_addr) == "127.0.0.1");
    CHECK(list[0].host_port == tport);
    CHECK(std::string(list[0].guest_addr) == "10.0.2.100");
    CHECK(list[0].guest_port == 8080);
    CHECK(list[1].protocol == RKNP_PROTO_UDP);

    REQUIRE(rknp_parent_remove_forward(r.p, tid, nullptr) == RKNP_OK);
    CHECK_FALSE(port_taken(SOCK_STREAM, tport));
    REQUIRE(rknp_parent_remove_forward(r.p, uid, nullptr) == RKNP_OK);
    CHECK_FALSE(port_taken(SOCK_DGRAM, uport));
    REQUIRE(rknp_parent_list_forwards(r.p, nullptr, 0, &count, nullptr) ==
            RKNP_OK);
    CHECK(count == 0);
}

TEST_CASE("IPv6 host addresses forward to the IPv4 guest") {
    Running r(tcp_path_case());
    uint16_t port = free_port();
    auto f = tcp(port, 80, "::1");
    uint32_t id = 0;
    REQUIRE(rknp_parent_add_forward(r.p, &f, &id, nullptr) == RKNP_OK);
    rknp_forward_info info{};
    info.struct_size = sizeof info;
    uint32_t count = 0;
    REQUIRE(rknp_parent_list_forwards(r.p, &info, 1, &count, nullptr) == RKNP_OK);
    CHECK(std::string(info.host_addr) == "::1");
    CHECK(rknp_parent_remove_forward(r.p, id, nullptr) == RKNP_OK);
}

TEST_CASE("1.7: an IPv6 guest_addr, listed in full in guest_addr_full") {
    Running r(RKNP_TCP_PATH_FAST, true);
    uint16_t tport = free_port(), uport = free_port();
    auto t = tcp(tport, 80, "::1");
    t.guest_addr = "fd00:aaaa::0002"; // routed behind the guest (a bridge)
    auto u = tcp(uport, 53, "127.0.0.1");
    u.protocol = RKNP_PROTO_UDP;
    u.guest_addr = "fd00::100"; // the guest's own IPv6 address
    uint32_t tid = 0, uid = 0;
    REQUIRE(rknp_parent_add_forward(r.p, &t, &tid, nullptr) == RKNP_OK);
    REQUIRE(rknp_parent_add_forward(r.p, &u, &uid, nullptr) == RKNP_OK);
    rknp_forward_info list[2];
    for (auto &i : list) i.struct_size = sizeof i;
    uint32_t count = 0;
    REQUIRE(rknp_parent_list_forwards(r.p, list, 2, &count, nullptr) == RKNP_OK);
    REQUIRE(count == 2);
    CHECK(std::string(list[0].guest_addr).empty()); // 16 bytes: never a cut address
    CHECK(std::string(list[0].guest_addr_full) == "fd00:aaaa::2");
    CHECK(std::string(list[1].guest_addr_full) == "fd00::100");
    CHECK(list[0].reserved_1_7[0] == 0);
    // An IPv4 one in both.
    auto v4 = tcp(free_port(), 80);
    uint32_t vid = 0;
    REQUIRE(rknp_parent_add_forward(r.p, &v4, &vid, nullptr) == RKNP_OK);
    rknp_forward_info three[3];
    for (auto &i : three) i.struct_size = sizeof i;
    REQUIRE(rknp_parent_list_forwards(r.p, three, 3, &count, nullptr) == RKNP_OK);
    CHECK(std::string(three[2].guest_addr) == "10.0.2.100");
    CHECK(std::string(three[2].guest_addr_full) == "10.0.2.100");
    // A 1.1 caller's element: guest_addr "" and nothing past its size.
    const uint32_t stride = 84; // sizeof in the 1.1 header on LP64
    std::vector<unsigned char> out(stride + 64, 0xA5);
    std::memcpy(out.data(), &stride, sizeof stride);
    REQUIRE(rknp_parent_list_forwards(r.p, reinterpret_cast<rknp_forward_info *>(out.data()), 1,
                                      &count, nullptr) == RKNP_OK);
    const auto *old = reinterpret_cast<const rknp_forward_info *>(out.data());
    CHECK(old->guest_addr[0] == '\0');
    CHECK(old->host_port == tport);
    for (size_t i = stride; i < out.size(); ++i) CHECK(out[i] == 0xA5);
    // Refused by name: the guest's IPv6 network's own addresses.
    t = tcp(free_port(), 80, "::1");
    t.guest_addr = "fd00::3";
    CHECK(add_error(r.p, t, RKNP_ERR_INVALID_ARGUMENT) ==
          "invalid guest_addr \"fd00::3\": the DNS forwarder of fd00::/64, not a guest");
    t.guest_addr = "::1";
    CHECK(add_error(r.p, t, RKNP_ERR_INVALID_ARGUMENT) ==
          "invalid guest_addr \"::1\": outside fd00::/64, so routed behind the guest, but "
          "not a global unicast address");
}

TEST_CASE("1.7: an IPv6 guest_addr needs IPv6 and, for TCP, the fast path") {
    {
        Running r(RKNP_TCP_PATH_FAST, false);
        auto f = tcp(free_port(), 80);
        f.guest_addr = "fd00::100";
        CHECK(add_error(r.p, f, RKNP_ERR_INVALID_ARGUMENT) ==
              "invalid guest_addr \"fd00::100\": IPv6 is not enabled");
    }
    Running r(RKNP_TCP_PATH_SLIRP, true);
    const uint16_t port = free_port();
    auto f = tcp(port, 80);
    f.guest_addr = "fd00::100";
    CHECK(add_error(r.p, f, RKNP_ERR_UNSUPPORTED) ==
          "forward tcp 127.0.0.1:" + std::to_string(port) +
              " to fd00::100: an IPv6 guest address needs the TCP fast path (with "
              "offloads), not libslirp");
    CHECK_FALSE(port_taken(SOCK_STREAM, port));
}

TEST_CASE("1.7: RKNP_FORWARD_HANDOFF_LOOPBACK hands a loopback client to the caller") {
    Running r(RKNP_TCP_PATH_FAST);
    int pair[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == 0);
    const uint16_t port = free_port();
    auto f = tcp(port, 80);
    f.flags = RKNP_FORWARD_HANDOFF_LOOPBACK;
    f.handoff_fd = pair[1];
    uint32_t id = 0;
    REQUIRE(rknp_parent_add_forward(r.p, &f, &id, nullptr) == RKNP_OK);
    close(pair[1]); // the library holds its own
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(port);
    REQUIRE(connect(c, reinterpret_cast<sockaddr *>(&to), sizeof to) == 0);
    rknp_handoff m{};
    rknp::UniqueFd fd;
    int flags = 0;
    REQUIRE(rknp::recv_with_fd(pair[0], &m, sizeof m, fd, flags, 0) == ssize_t(sizeof m));
    CHECK(m.struct_size == sizeof m);
    CHECK(m.guest_port == 80);
    REQUIRE(fd);
    CHECK(send(c, "hi", 2, 0) == 2);
    char b[2];
    CHECK(recv(fd.get(), b, 2, 0) == 2);
    close(c);
    close(pair[0]);
    // The stack thread publishes its counters at the end of the round
    // that handed the connection over, which may come after the message
    // arrived here (valgrind: it did).
    rknp_stats st{};
    st.struct_size = sizeof st;
    for (int i = 0; i < 200; ++i) {
        REQUIRE(rknp_parent_stats(r.p, &st, nullptr) == RKNP_OK);
        if (st.tcp_forward_accepted == 1) break;
        usleep(50 * 1000);
    }
    CHECK(st.tcp_forward_accepted == 1);
    CHECK(st.tcp_forward_flows == 0);
}

TEST_CASE("1.7: RKNP_FORWARD_HANDOFF_LOOPBACK's bad uses fail cleanly") {
    Running r(RKNP_TCP_PATH_FAST);
    int pair[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
    auto f = tcp(free_port(), 80);
    f.flags = 2;
    CHECK(add_error(r.p, f, RKNP_ERR_INVALID_ARGUMENT) ==
          "invalid flags 2: only RKNP_FORWARD_HANDOFF_LOOPBACK is known");
    f.flags = RKNP_FORWARD_HANDOFF_LOOPBACK;
    f.handoff_fd = pair[0];
    CHECK(add_error(r.p, f, RKNP_ERR_INVALID_ARGUMENT) ==
          "invalid handoff_fd " + std::to_string(pair[0]) +
              ": not an AF_UNIX SOCK_SEQPACKET socket");
    f.handoff_fd = -1;
    CHECK(add_error(r.p, f, RKNP_ERR_INVALID_ARGUMENT) ==
          "invalid handoff_fd -1: not an AF_UNIX SOCK_SEQPACKET socket");
    f.protocol = RKNP_PROTO_UDP;
    CHECK(add_error(r.p, f, RKNP_ERR_INVALID_ARGUMENT) ==
          "RKNP_FORWARD_HANDOFF_LOOPBACK is for TCP forwards only");
    close(pair[0]);
    close(pair[1]);
}

TEST_CASE("duplicates, ports in use, bad values and unknown ids fail cleanly") {
    Running r(tcp_path_case());
    uint16_t port = free_port();
    auto f = tcp(port);
    uint32_t id = 0;
    REQUIRE(rknp_parent_add_forward(r.p, &f, &id, nullptr) == RKNP_OK);
    CHECK(add_error(r.p, f, RKNP_ERR_INVALID_ARGUMENT) ==
          "tcp 127.0.0.1:" + std::to_string(port) +
              " is already forwarded (id " + std::to_string(id) + ")");

    int busy = bind_local(SOCK_STREAM, 0);
    REQUIRE(listen(busy, 1) == 0);
    sockaddr_in a{};
    socklen_t len = sizeof a;
    getsockname(busy, reinterpret_cast<sockaddr *>(&a), &len);
    auto in_use = tcp(ntohs(a.sin_port));
    CHECK(add_error(r.p, in_use, RKNP_ERR_SYSTEM) ==
          "forward tcp 127.0.0.1:" + std::to_string(ntohs(a.sin_port)) +
              ": Address already in use");
    close(busy);

    auto bad = tcp(0);
    CHECK(add_error(r.p, bad, RKNP_ERR_INVALID_ARGUMENT) ==
          "invalid host_port \"0\": must be 1..65535");
    bad = tcp(uint32_t(port) + 1, 70000);
    CHECK(add_error(r.p, bad, RKNP_ERR_INVALID_ARGUMENT) ==
          "invalid guest_port \"70000\": must be 1..65535");
    bad = tcp(port + 1, 80, "localhost");
    CHECK(add_error(r.p, bad, RKNP_ERR_INVALID_ARGUMENT).find("host_addr") !=
          std::string::npos);
    // Outside the network (1.7): routed behind the guest, if unicast.
    bad = tcp(port + 1);
    bad.guest_addr = "127.0.0.1";
    CHECK(add_error(r.p, bad, RKNP_ERR_INVALID_ARGUMENT) ==
          "invalid guest_addr \"127.0.0.1\": outside 10.0.2.0/24, so routed behind "
          "the guest, but not a unicast address");
    bad.guest_addr = "10.0.2.2";
    CHECK(add_error(r.p, bad, RKNP_ERR_INVALID_ARGUMENT) ==
          "invalid guest_addr \"10.0.2.2\": the gateway of 10.0.2.0/24, not a guest");
    // A bridge network's container behind the guest: taken and listed.
    auto routed = tcp(free_port());
    routed.guest_addr = "10.89.0.2";
    uint32_t rid = 0;
    REQUIRE(rknp_parent_add_forward(r.p, &routed, &rid, nullptr) == RKNP_OK);
    {
        rknp_forward_info list[4];
        for (auto &i : list) i.struct_size = sizeof i;
        uint32_t n = 0;
        CHECK(rknp_parent_list_forwards(r.p, list, 4, &n, nullptr) == RKNP_OK);
        bool listed = false;
        for (uint32_t i = 0; i < n && i < 4; i++)
            listed = listed || (list[i].id == rid && std::string(list[i].guest_addr) == "10.89.0.2");
        CHECK(listed);
        CHECK(rknp_parent_remove_forward(r.p, rid, nullptr) == RKNP_OK);
    }
    bad = tcp(port + 1);
    bad.protocol = 7;
    CHECK(add_error(r.p, bad, RKNP_ERR_INVALID_ARGUMENT).find("protocol") !=
          std::string::npos);

    rknp_error *err = nullptr;
    CHECK(rknp_parent_remove_forward(r.p, 999, &err) == RKNP_ERR_INVALID_ARGUMENT);
    CHECK(std::string(rknp_error_message(err)) == "no forward with id 999");
    rknp_error_free(err);
    CHECK(rknp_parent_remove_forward(r.p, id, nullptr) == RKNP_OK);
    CHECK(rknp_parent_remove_forward(r.p, id, nullptr) == RKNP_ERR_INVALID_ARGUMENT);
}

TEST_CASE("forwards need a running parent; many threads may add at once") {
    rknp_config cfg;
    rknp_config_init(&cfg, sizeof cfg);
    rknp_parent *p = nullptr;
    REQUIRE(rknp_parent_new(&cfg, &p, nullptr) == RKNP_OK);
    auto f = tcp(free_port());
    CHECK(add_error(p, f, RKNP_ERR_STATE) == "parent is not running");
    rknp_parent_free(p);

    Running r;
    std::vector<std::thread> threads;
    std::vector<rknp_status> results(8, -1);
    std::vector<uint16_t> ports;
    for (int i = 0; i < 8; ++i) ports.push_back(free_port());
    for (int i = 0; i < 8; ++i)
        threads.emplace_back([&, i] {
            auto fw = tcp(ports[size_t(i)]);
            uint32_t id;
            results[size_t(i)] = rknp_parent_add_forward(r.p, &fw, &id, nullptr);
        });
    for (auto &t : threads) t.join();
    for (auto rc : results) CHECK(rc == RKNP_OK);
    uint32_t count = 0;
    rknp_parent_list_forwards(r.p, nullptr, 0, &count, nullptr);
    CHECK(count == 8);
    rknp_parent_close(r.p);
    CHECK(add_error(r.p, f, RKNP_ERR_STATE) == "parent is not running");
    // Closing stopped every forward: none is listed, none can be removed.
    REQUIRE(rknp_parent_list_forwards(r.p, nullptr, 0, &count, nullptr) == RKNP_OK);
    CHECK(count == 0);
    CHECK(rknp_parent_remove_forward(r.p, 1, nullptr) == RKNP_ERR_STATE);
    // ... and their host ports are free again.
    for (uint16_t port : ports) CHECK(!port_taken(SOCK_STREAM, port));
}

TEST_CASE("listing steps through the caller's array by its struct_size") {
    Running r;
    uint16_t a = free_port(), b = free_port();
    uint32_t ida = 0, idb = 0;
    auto fa = tcp(a, 81), fb = tcp(b, 82);
    REQUIRE(rknp_parent_add_forward(r.p, &fa, &ida, nullptr) == RKNP_OK);
    REQUIRE(rknp_parent_add_forward(r.p, &fb, &idb, nullptr) == RKNP_OK);
    // A newer caller's element: our fields, then some the library lacks.
    struct Newer {
        rknp_forward_info info;
        uint64_t later[3];
    };
    std::vector<Newer> list(3);
    for (auto &n : list) {
        n.info.struct_size = sizeof n;
        n.later[0] = n.later[1] = n.later[2] = ~0ull;
    }
    uint32_t count = 0;
    REQUIRE(rknp_parent_list_forwards(r.p, &list[0].info, 3, &count,
                                      nullptr) == RKNP_OK);
    CHECK(count == 2);
    CHECK(list[0].info.id == ida);
    CHECK(list[0].info.guest_port == 81);
    CHECK(list[1].info.id == idb);
    CHECK(list[1].info.guest_port == 82);
    CHECK(list[1].info.struct_size == sizeof(Newer));
    CHECK(list[1].later[2] == 0); // zeroed: this library has no such field
    CHECK(list[2].later[0] == ~0ull); // past count: untouched

    list[1].info.struct_size = sizeof(rknp_forward_info);
    rknp_error *err = nullptr;
    CHECK(rknp_parent_list_forwards(r.p, &list[0].info, 3, &count, &err) ==
          RKNP_ERR_INVALID_ARGUMENT);
    CHECK(std::string(rknp_error_message(err)) ==
          "rknp_forward_info[1].struct_size differs from element 0's");
    rknp_error_free(err);
}

TEST_CASE("a 1.1 caller's rknp_forward and rknp_forward_info: poisoned bytes past its size") {
    Running r;
    for (unsigned char poison : {0xA5, 0x01}) {
        CAPTURE(int(poison));
        // rknp_forward: nothing past struct_size is read (0xA5 would make
        // any field invalid).
        std::vector<unsigned char> in(sizeof(rknp_forward) + 64, poison);
        rknp_forward set = tcp(free_port(), 83);
        set.struct_size = RKNP_FORWARD_SIZE_1_1; // a 1.1 caller's sizeof
        std::memcpy(in.data(), &set, RKNP_FORWARD_SIZE_1_1);
        uint32_t id = 0;
        rknp_error *err = nullptr;
        auto *fwd = reinterpret_cast<rknp_forward *>(in.data());
        REQUIRE_MESSAGE(rknp_parent_add_forward(r.p, fwd, &id, &err) ==
                            RKNP_OK,
                        (err ? rknp_error_message(err) : ""));
        // rknp_forward_info as the 1.1 header laid it out (sizeof 84 on
        // LP64: its 2 bytes of tail padding, now reserved_1_1, zeroed):
        // the same fields a full-size caller gets.
        rknp_forward_info full{};
        full.struct_size = sizeof full;
        uint32_t count = 0;
        REQUIRE(rknp_parent_list_forwards(r.p, &full, 1, &count, nullptr) ==
                RKNP_OK);
        REQUIRE(count == 1);
        const size_t frozen = RKNP_FORWARD_INFO_SIZE_1_1;
        const uint32_t stride = uint32_t(
            (frozen + alignof(rknp_forward_info) - 1) /
            alignof(rknp_forward_info) * alignof(rknp_forward_info));
        std::vector<unsigned char> out(2 * stride + 64, poison);
        for (size_t i = 0; i < 2; ++i)
            std::memcpy(out.data() + i * stride, &stride, sizeof stride);
        REQUIRE(rknp_parent_list_forwards(
                    r.p, reinterpret_cast<rknp_forward_info *>(out.data()), 2,
                    &count, nullptr) == RKNP_OK);
        CHECK(std::memcmp(out.data() + 4,
                          reinterpret_cast<unsigned char *>(&full) + 4,
                          frozen - 4) == 0);
        for (size_t i = frozen; i < stride; ++i) CHECK(out[i] == 0);
        // Element 1 (no second forward) keeps its poison.
        for (size_t i = stride + 4; i < out.size(); ++i)
            CHECK(out[i] == poison);
        REQUIRE(rknp_parent_remove_forward(r.p, id, nullptr) == RKNP_OK);
    }
}

namespace {

// Socket fds of this process, and which of them a fork+exec would pass on.
std::vector<int> sockets(bool only_inheritable) {
    std::vector<int> out;
    for (int fd = 0; fd < 4096; ++fd) {
        char link[64], target[64] = {};
        std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n <= 0 || std::string(target, size_t(n)).rfind("socket:", 0) != 0)
            continue;
        int flags = fcntl(fd, F_GETFD);
        if (!only_inheritable || (flags >= 0 && !(flags & FD_CLOEXEC)))
            out.push_back(fd);
    }
    return out;
}
std::vector<int> inheritable_sockets() { return sockets(true); }

} // namespace

TEST_CASE("sockets libslirp opens for forwards are close-on-exec") {
    uint8_t path = tcp_path_case();
    REQUIRE(inheritable_sockets().empty());
    Running r(path);
    uint16_t port = free_port();
    auto f = tcp(port, 80);
    uint32_t id = 0;
    REQUIRE(rknp_parent_add_forward(r.p, &f, &id, nullptr) == RKNP_OK);
    // A client connects: libslirp accepts it on the stack thread (with
    // accept(2), no SOCK_CLOEXEC, in 4.7.0).
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    size_t before = sockets(false).size(); // c included
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    REQUIRE(connect(c, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
    // Wait for the accepted socket to exist, so the check below is about it.
    for (int i = 0; i < 500 && sockets(false).size() <= before; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    REQUIRE(sockets(false).size() > before);
    CHECK(inheritable_sockets().empty());
    // What a child would see: exec a shell that counts its own sockets.
    std::string inherited;
    if (FILE *out = popen("ls -l /proc/$$/fd | grep -c socket: || true", "r")) {
        char buf[32] = {};
        if (fgets(buf, sizeof buf, out)) inherited = buf;
        pclose(out);
    }
    CHECK(inherited == "0\n");
    close(c);
}
