// SPDX-License-Identifier: Apache-2.0

// Tests of the C ABI as a loader sees it: only rknp.h and the shared library.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../unit/temp_dir.hpp"
#include "rknp.h"

namespace {

rknp_parent *make_parent(rknp_config &cfg) {
    rknp_parent *p = nullptr;
    rknp_error *err = nullptr;
    REQUIRE(rknp_parent_new(&cfg, &p, &err) == RKNP_OK);
    CHECK(err == nullptr);
    return p;
}

rknp_config default_config() {
    rknp_config cfg;
    REQUIRE(rknp_config_init(&cfg, sizeof cfg) == RKNP_OK);
    return cfg;
}

} // namespace

TEST_CASE("the versioned entry point returns the v1 table, NULL otherwise") {
    auto *api = static_cast<const rknp_api_v1 *>(rknp_get_api(1));
    REQUIRE(api != nullptr);
    CHECK(api->struct_size == sizeof(rknp_api_v1));
    CHECK(api->abi_major == RKNP_ABI_MAJOR);
    CHECK(api->abi_minor == RKNP_ABI_MINOR);
    CHECK((api->parent_new == &rknp_parent_new));
    CHECK((api->child_configure == &rknp_child_configure));
    CHECK(rknp_get_api(0) == nullptr);
    CHECK(rknp_get_api(2) == nullptr);
    CHECK(rknp_abi_version() == RKNP_ABI_VERSION);
    CHECK(std::string(rknp_library_version()).find("libslirp 4.") !=
          std::string::npos);
}

TEST_CASE("NULL handles and arguments give errors, never crashes") {
    rknp_error *err = nullptr;
    CHECK(rknp_config_init(nullptr, sizeof(rknp_config)) ==
          RKNP_ERR_INVALID_ARGUMENT);
    rknp_config cfg;
    CHECK(rknp_config_init(&cfg, 4) == RKNP_ERR_INVALID_ARGUMENT);
    CHECK(rknp_parent_new(nullptr, nullptr, &err) == RKNP_ERR_INVALID_ARGUMENT);
    CHECK(std::string(rknp_error_message(err)) == "config is NULL");
    CHECK(rknp_error_code(err) == RKNP_ERR_INVALID_ARGUMENT);
    rknp_error_free(err);
    CHECK(rknp_parent_start(nullptr, "/tmp", 1, &err) ==
          RKNP_ERR_INVALID_ARGUMENT);
    rknp_error_free(err);
    CHECK(rknp_parent_start(nullptr, "/tmp", 1, nullptr) ==
          RKNP_ERR_INVALID_ARGUMENT); // err may be NULL
    rknp_network net{};
    net.struct_size = sizeof net;
    CHECK(rknp_parent_network(nullptr, &net, nullptr) ==
          RKNP_ERR_INVALID_ARGUMENT);
    CHECK(rknp_parent_opaque_count(nullptr) == 0);
    const char *k, *v;
    CHECK(rknp_parent_opaque_get(nullptr, 0, &k, &v, nullptr) ==
          RKNP_ERR_INVALID_ARGUMENT);
    CHECK(rknp_parent_stats(nullptr, nullptr, nullptr) ==
          RKNP_ERR_INVALID_ARGUMENT);
    rknp_parent_close(nullptr);
    rknp_parent_free(nullptr);
    rknp_error_free(nullptr);
    CHECK(rknp_error_code(nullptr) == RKNP_ERR_INVALID_ARGUMENT);
    CHECK(std::string(rknp_error_message(nullptr)).empty());
    CHECK(rknp_child_configure(nullptr, 1, nullptr, nullptr, 0, &err) ==
          RKNP_ERR_INVALID_ARGUMENT);
    rknp_error_free(err);
}

TEST_CASE("a bad config value is reported with the option name") {
    auto cfg = default_config();
    cfg.mtu = 70000;
    rknp_parent *p = nullptr;
    rknp_error *err = nullptr;
    CHECK(rknp_parent_new(&cfg, &p, &err) == RKNP_ERR_INVALID_ARGUMENT);
    CHECK(p == nullptr);
    CHECK(std::string(rknp_error_message(err)) ==
          "invalid mtu \"70000\": must be 68..65520");
    rknp_error_free(err);
}

TEST_CASE("a bad udp_path is refused by name, like tcp_path") {
    auto cfg = default_config();
    CHECK(cfg.udp_path == RKNP_UDP_PATH_DEFAULT);
    for (uint8_t bad : {uint8_t(3), uint8_t(0xFF)}) {
        cfg.udp_path = bad;
        rknp_parent *p = nullptr;
        rknp_error *err = nullptr;
        CHECK(rknp_parent_new(&cfg, &p, &err) == RKNP_ERR_INVALID_ARGUMENT);
        CHECK(p == nullptr);
        CHECK(std::string(rknp_error_message(err)) ==
              "invalid udp_path \"" + std::to_string(bad) +
                  "\": must be RKNP_UDP_PATH_DEFAULT, _FAST or _SLIRP");
        rknp_error_free(err);
    }
}

TEST_CASE("network info reflects the configuration") {
    auto cfg = default_config();
    cfg.cidr = "10.0.135.128/25";
    cfg.mtu = 1500;
    cfg.ifname = "eth7";
    cfg.enable_ipv6 = 1;
    rknp_parent *p = make_parent(cfg);
    rknp_network net{};
    net.struct_size = sizeof net;
    REQUIRE(rknp_parent_network(p, &net, nullptr) == RKNP_OK);
    CHECK(net.mtu == 1500);
    CHECK(std::string(net.ifname) == "eth7");
    CHECK(std::string(net.ip) == "10.0.135.228");
    CHECK(net.prefix_len == 25);
    CHECK(std::string(net.gateway) == "10.0.135.130");
    REQUIRE(net.dns_count == 2);
    CHECK(std::string(net.dns[0]) == "10.0.135.131");
    CHECK(std::string(net.dns[1]) == "fd00::3");
    CHECK(std::string(net.ipv6_gateway) == "fd00::2");
    net.struct_size = 4;
    CHECK(rknp_parent_network(p, &net, nullptr) == RKNP_ERR_INVALID_ARGUMENT);
    rknp_parent_free(p);

    cfg = default_config();
    cfg.disable_dns = 1;
    p = make_parent(cfg);
    net.struct_size = sizeof net;
    REQUIRE(rknp_parent_network(p, &net, nullptr) == RKNP_OK);
    CHECK(net.dns_count == 0);
    CHECK(std::string(net.ipv6_gateway).empty());
    rknp_parent_free(p);

    // 1.6: pasta's model, the host's address and a DNS forwarder outside
    // the network, as Podman asks for them.
    cfg = default_config();
    cfg.cidr = "192.168.7.0/24";
    cfg.guest_address = "192.168.7.5";
    cfg.gateway = "192.168.7.1";
    cfg.dns_address = "169.254.1.1";
    cfg.map_guest_addr = "169.254.1.2";
    cfg.network_model = RKNP_NETWORK_MODEL_HOST;
    p = make_parent(cfg);
    REQUIRE(rknp_parent_network(p, &net, nullptr) == RKNP_OK);
    CHECK(std::string(net.ip) == "192.168.7.5");
    CHECK(net.prefix_len == 24);
    CHECK(std::string(net.gateway) == "192.168.7.1");
    REQUIRE(net.dns_count == 1);
    CHECK(std::string(net.dns[0]) == "169.254.1.1");
    rknp_parent_free(p);
}

TEST_CASE("lifecycle: start, close twice, no restart, free") {
    TempDir dir;
    auto cfg = default_config();
    rknp_parent *p = make_parent(cfg);
    CHECK(rknp_parent_opaque_count(p) == 0);
    rknp_error *err = nullptr;
    REQUIRE(rknp_parent_start(p, dir.path().c_str(), 12345, &err) == RKNP_OK);
    std::string sock = dir.path() + "/rknp.sock";
    CHECK(access(sock.c_str(), F_OK) == 0);
    CHECK(rknp_parent_start(p, dir.path().c_str(), 12345, &err) ==
          RKNP_ERR_STATE);
    CHECK(std::string(rknp_error_message(err)) == "parent already started");
    rknp_error_free(err);

    uint32_t n = rknp_parent_opaque_count(p);
    CHECK(n >= 8);
    bool has_socket = false;
    for (uint32_t i = 0; i < n; ++i) {
        const char *k, *v;
        REQUIRE(rknp_parent_opaque_get(p, i, &k, &v, nullptr) == RKNP_OK);
        if (std::string(k) == "rknp.socket") has_socket = sock == v;
    }
    CHECK(has_socket);
    const char *k, *v;
    CHECK(rknp_parent_opaque_get(p, n, &k, &v, nullptr) ==
          RKNP_ERR_INVALID_ARGUMENT);

    rknp_stats st{};
    st.struct_size = sizeof st;
    REQUIRE(rknp_parent_stats(p, &st, nullptr) == RKNP_OK);
    CHECK(st.tap_attached == 0);

    rknp_parent_close(p);
    CHECK(access(sock.c_str(), F_OK) != 0); // socket file removed
    rknp_parent_close(p);
    CHECK(rknp_parent_start(p, dir.path().c_str(), 12345, &err) ==
          RKNP_ERR_STATE);
    CHECK(std::string(rknp_error_message(err)) == "parent is closed");
    rknp_error_free(err);
    rknp_parent_free(p);
}

TEST_CASE("start errors: bad state_dir, bad pid, closed without start") {
    auto cfg = default_config();
    rknp_parent *p = make_parent(cfg);
    rknp_error *err = nullptr;
    CHECK(rknp_parent_start(p, "relative", 1, &err) == RKNP_ERR_INVALID_ARGUMENT);
    rknp_error_free(err);
    CHECK(rknp_parent_start(p, "/tmp", 0, &err) == RKNP_ERR_INVALID_ARGUMENT);
    rknp_error_free(err);
    CHECK(rknp_parent_start(p, "/nonexistent-dir-rknp", 1, &err) ==
          RKNP_ERR_SYSTEM);
    CHECK(std::string(rknp_error_message(err)).find("/nonexistent-dir-rknp") !=
          std::string::npos);
    rknp_error_free(err);
    {
        // Others could replace the socket in a directory they can write
        // to: refused, naming the directory, its owner and mode.
        TempDir open_dir;
        REQUIRE(chmod(open_dir.path().c_str(), 01777) == 0);
        CHECK(rknp_parent_start(p, open_dir.path().c_str(), 1, &err) ==
              RKNP_ERR_PERMISSION);
        CHECK(std::string(rknp_error_message(err)) ==
              "hand-over: state directory " + open_dir.path() + " (owner uid " +
                  std::to_string(geteuid()) +
                  ") has mode 1777: group or others may write to it; refusing it");
        rknp_error_free(err);
        CHECK(access((open_dir.path() + "/rknp.sock").c_str(), F_OK) != 0);
    }
    rknp_parent_close(p); // never started
    rknp_parent_free(p);
    p = make_parent(cfg);
    rknp_parent_free(p); // free without close
}

TEST_CASE("close from another thread while running") {
    TempDir dir;
    auto cfg = default_config();
    rknp_parent *p = make_parent(cfg);
    REQUIRE(rknp_parent_start(p, dir.path().c_str(), 12345, nullptr) == RKNP_OK);
    std::thread a([p] { rknp_parent_close(p); });
    std::thread b([p] { rknp_parent_close(p); });
    a.join();
    b.join();
    rknp_parent_free(p);
}

TEST_CASE("child side reports missing opaque keys before touching anything") {
    rknp_kv kv[] = {{"rknp.ifname", "tap0"}};
    rknp_error *err = nullptr;
    char dev[16];
    CHECK(rknp_child_configure(kv, 1, nullptr, dev, sizeof dev, &err) ==
          RKNP_ERR_INVALID_ARGUMENT);
    CHECK(std::string(rknp_error_message(err)).find("rknp.socket") !=
          std::string::npos);
    rknp_error_free(err);
    CHECK(rknp_child_configure(kv, 1, nullptr, dev, 4, &err) ==
          RKNP_ERR_INVALID_ARGUMENT);
    rknp_error_free(err);
    rknp_child_options opts;
    CHECK(rknp_child_options_init(&opts, 2) == RKNP_ERR_INVALID_ARGUMENT);
}

TEST_CASE("stats: the UDP fast path's counters start at 0 on either UDP path") {
    for (uint8_t path : {RKNP_UDP_PATH_DEFAULT, RKNP_UDP_PATH_FAST,
                         RKNP_UDP_PATH_SLIRP}) {
        CAPTURE(int(path));
        TempDir dir;
        auto cfg = default_config();
        cfg.udp_path = path;
        rknp_parent *p = make_parent(cfg);
        REQUIRE(rknp_parent_start(p, dir.path().c_str(), 12345, nullptr) ==
                RKNP_OK);
        rknp_stats stats;
        std::memset(&stats, 0xA5, sizeof stats);
        stats.struct_size = sizeof stats;
        REQUIRE(rknp_parent_stats(p, &stats, nullptr) == RKNP_OK);
        CHECK(stats.udp_fast_flows == 0);
        CHECK(stats.udp_fast_dropped == 0);
        rknp_parent_free(p);
    }
}

TEST_CASE("stats.tcp_peek_mode: the fast path's mode once started, 0 without it") {
    // What the kernel says about SO_PEEK_OFF on TCP (Linux >= 6.9).
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(s >= 0);
    int zero = 0;
    const bool peek_off = ::setsockopt(s, SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof zero) == 0;
    ::close(s);
    struct Case {
        uint8_t path, asked;
        rknp_status start;
        uint32_t in_force;
    };
    const uint32_t automatic = peek_off ? RKNP_TCP_PEEK_OFFSET : RKNP_TCP_PEEK_DISCARD;
    const Case cases[] = {
        {RKNP_TCP_PATH_DEFAULT, RKNP_TCP_PEEK_AUTO, RKNP_OK, automatic},
        {RKNP_TCP_PATH_FAST, RKNP_TCP_PEEK_DISCARD, RKNP_OK, RKNP_TCP_PEEK_DISCARD},
        {RKNP_TCP_PATH_FAST, RKNP_TCP_PEEK_OFFSET,
         peek_off ? RKNP_OK : RKNP_ERR_UNSUPPORTED, peek_off ? uint32_t(RKNP_TCP_PEEK_OFFSET) : 0u},
        {RKNP_TCP_PATH_SLIRP, RKNP_TCP_PEEK_DISCARD, RKNP_OK, 0},
    };
    for (const Case &c : cases) {
        CAPTURE(int(c.path));
        CAPTURE(int(c.asked));
        TempDir dir;
        auto cfg = default_config();
        cfg.tcp_path = c.path;
        cfg.tcp_peek_mode = c.asked;
        rknp_parent *p = make_parent(cfg);
        rknp_error *err = nullptr;
        const rknp_status st = rknp_parent_start(p, dir.path().c_str(), 12345, &err);
        CHECK(st == c.start);
        if (st != RKNP_OK) {
            // A kernel before 6.9 with the offset mode forced.
            CHECK(std::string(rknp_error_message(err)).find("SO_PEEK_OFF") !=
                  std::string::npos);
            rknp_error_free(err);
        } else {
            rknp_stats stats{};
            stats.struct_size = sizeof stats;
            REQUIRE(rknp_parent_stats(p, &stats, nullptr) == RKNP_OK);
            CHECK(stats.tcp_peek_mode == c.in_force);
        }
        rknp_parent_free(p);
    }
}
