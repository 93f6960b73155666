// SPDX-License-Identifier: Apache-2.0

// ABI misuse through the public library only (what tests/abi/test_abi.cpp
// does not cover): wrong versions and struct sizes, NULL out-parameters,
// use after close, free while running, close racing with other calls,
// thread/fd leaks over many lifecycles. Hostile hand-over peers:
// test_hostile_peers.cpp.
#include <doctest/doctest.h>

#include <dlfcn.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "misuse_rig.hpp"

using namespace misuse;

TEST_CASE("wrong ABI majors and a dlopen'ed table") {
    void *h = dlopen(RKNP_LIB_PATH, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(h != nullptr);
    auto get = reinterpret_cast<rknp_get_api_fn>(dlsym(h, RKNP_GET_API_SYMBOL));
    REQUIRE(bool(get));
    for (uint32_t major : {0u, 2u, 0xffffu, 0x10000u, 0xffffffffu})
        CHECK(get(major) == static_cast<const void *>(nullptr));
    auto *api = static_cast<const rknp_api_v1 *>(get(1));
    REQUIRE(api != nullptr);
    CHECK(api->abi_major == 1);
    CHECK(api->struct_size >= offsetof(rknp_api_v1, parent_list_forwards) + sizeof(void *));
    CHECK((api->abi_version() >> 16) == 1u);
    // Every v1 slot is filled.
    const void *const *slot = reinterpret_cast<const void *const *>(&api->error_code);
    const void *const *end = reinterpret_cast<const void *const *>(
        reinterpret_cast<const char *>(api) + api->struct_size);
    for (; slot < end; ++slot) CHECK(*slot != nullptr);
    dlclose(h);
}

TEST_CASE("struct sizes: too small is refused, larger (a newer caller) is accepted") {
    rknp_config c = config();
    rknp_parent *p = nullptr;
    rknp_error *err = nullptr;
    c.struct_size = 8; // a caller that skipped rknp_config_init
    CHECK(rknp_parent_new(&c, &p, &err) == RKNP_ERR_INVALID_ARGUMENT);
    CHECK(p == nullptr);
    CHECK(std::string(rknp_error_message(err)).find("struct_size") != std::string::npos);
    rknp_error_free(err);
    // A newer header's larger struct, its tail zeroed: v1 fields used.
    struct {
        rknp_config v1;
        uint64_t future[4];
    } big{};
    REQUIRE(rknp_config_init(&big.v1, sizeof big) == RKNP_OK);
    CHECK(big.v1.struct_size == sizeof big); // the caller's size is kept
    REQUIRE(rknp_parent_new(&big.v1, &p, nullptr) == RKNP_OK);
    rknp_stats st{};
    st.struct_size = 8;
    CHECK(rknp_parent_stats(p, &st, nullptr) == RKNP_ERR_INVALID_ARGUMENT);
    rknp_forward_info info[1];
    info[0].struct_size = 4;
    uint32_t count = 0;
    // Refused even with no forward to list: the array itself is invalid.
    CHECK(rknp_parent_list_forwards(p, info, 1, &count, nullptr) ==
          RKNP_ERR_INVALID_ARGUMENT);
    rknp_forward f;
    CHECK(rknp_forward_init(&f, 4) == RKNP_ERR_INVALID_ARGUMENT);
    CHECK(rknp_forward_init(nullptr, sizeof f) == RKNP_ERR_INVALID_ARGUMENT);
    rknp_parent_free(p);
}

TEST_CASE("NULL out-parameters are errors, with or without an err pointer") {
    rknp_config c = config();
    rknp_error *err = nullptr;
    CHECK(rknp_parent_new(&c, nullptr, &err) == RKNP_ERR_INVALID_ARGUMENT);
    rknp_error_free(err);
    rknp_parent *p = nullptr;
    REQUIRE(rknp_parent_new(&c, &p, nullptr) == RKNP_OK);
    CHECK(rknp_parent_start(p, nullptr, 1, nullptr) == RKNP_ERR_INVALID_ARGUMENT);
    CHECK(rknp_parent_network(p, nullptr, nullptr) == RKNP_ERR_INVALID_ARGUMENT);
    CHECK(rknp_parent_stats(p, nullptr, nullptr) == RKNP_ERR_INVALID_ARGUMENT);
    const char *k = nullptr;
    CHECK(rknp_parent_opaque_get(p, 0, &k, nullptr, nullptr) == RKNP_ERR_INVALID_ARGUMENT);
    CHECK(rknp_parent_list_forwards(p, nullptr, 0, nullptr, nullptr) == RKNP_ERR_INVALID_ARGUMENT);
    CHECK(rknp_parent_list_forwards(p, nullptr, 3, nullptr, nullptr) == RKNP_ERR_INVALID_ARGUMENT);
    rknp_forward f;
    REQUIRE(rknp_forward_init(&f, sizeof f) == RKNP_OK);
    CHECK(rknp_parent_add_forward(p, &f, nullptr, nullptr) == RKNP_ERR_INVALID_ARGUMENT);
    CHECK(rknp_parent_add_forward(p, nullptr, nullptr, nullptr) == RKNP_ERR_INVALID_ARGUMENT);
    CHECK(rknp_parent_remove_forward(nullptr, 1, nullptr) == RKNP_ERR_INVALID_ARGUMENT);
    rknp_kv bad[] = {{"rknp.socket", nullptr}};
    CHECK(rknp_child_configure(bad, 1, nullptr, nullptr, 0, nullptr) ==
          RKNP_ERR_INVALID_ARGUMENT);
    rknp_child_options o{};
    o.struct_size = 4;
    rknp_kv ok[] = {{"rknp.ifname", "tap0"}};
    CHECK(rknp_child_configure(ok, 1, &o, nullptr, 0, nullptr) == RKNP_ERR_INVALID_ARGUMENT);
    rknp_parent_free(p);
}

TEST_CASE("queries stay valid after close; requests fail with STATE") {
    TempDir dir;
    rknp_parent *p = started(dir, 12345);
    uint32_t n = rknp_parent_opaque_count(p);
    REQUIRE(n > 0);
    const char *k0, *v0;
    REQUIRE(rknp_parent_opaque_get(p, 0, &k0, &v0, nullptr) == RKNP_OK);
    rknp_parent_close(p);
    rknp_parent_close(p);
    const char *k1, *v1;
    REQUIRE(rknp_parent_opaque_get(p, 0, &k1, &v1, nullptr) == RKNP_OK);
    CHECK(k0 == k1); // same storage, valid until free
    rknp_network net{};
    net.struct_size = sizeof net;
    CHECK(rknp_parent_network(p, &net, nullptr) == RKNP_OK);
    rknp_stats st{};
    st.struct_size = sizeof st;
    CHECK(rknp_parent_stats(p, &st, nullptr) == RKNP_OK);
    rknp_forward f;
    rknp_forward_init(&f, sizeof f);
    f.host_addr = "127.0.0.1";
    f.host_port = 1;
    f.guest_port = 1;
    uint32_t id;
    rknp_error *err = nullptr;
    CHECK(rknp_parent_add_forward(p, &f, &id, &err) == RKNP_ERR_STATE);
    rknp_error_free(err);
    CHECK(rknp_parent_remove_forward(p, 1, nullptr) != RKNP_OK);
    rknp_parent_free(p);
}

TEST_CASE("free while running joins the stack thread; no thread or fd leaks over cycles") {
    int t0 = threads(), f0 = fds();
    for (int i = 0; i < 40; ++i) {
        TempDir dir;
        rknp_parent *p = started(dir, 12345);
        CHECK(threads() == t0 + 1);
        if (i % 2 == 0) rknp_parent_close(p);
        rknp_parent_free(p); // odd rounds: free a running parent
    }
    CHECK(threads() == t0);
    CHECK(fds() == f0);
}

TEST_CASE("close from one thread while others query and add forwards") {
    TempDir dir;
    int t0 = threads();
    rknp_parent *p = started(dir, 12345);
    std::atomic<bool> go{true};
    std::vector<std::thread> users;
    for (int t = 0; t < 4; ++t)
        users.emplace_back([&] {
            while (go.load()) {
                rknp_stats st{};
                st.struct_size = sizeof st;
                CHECK(rknp_parent_stats(p, &st, nullptr) == RKNP_OK);
                uint32_t count;
                CHECK(rknp_parent_list_forwards(p, nullptr, 0, &count, nullptr) == RKNP_OK);
                // Port 1 as non-root: the bind fails on the stack thread
                // (SYSTEM) while running, STATE once closed; never OK.
                rknp_forward f;
                rknp_forward_init(&f, sizeof f);
                f.host_addr = "127.0.0.1";
                f.host_port = 1;
                f.guest_port = 80;
                uint32_t id;
                rknp_status s = rknp_parent_add_forward(p, &f, &id, nullptr);
                if (s == RKNP_OK) rknp_parent_remove_forward(p, id, nullptr);
            }
        });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::thread closer([&] { rknp_parent_close(p); });
    closer.join();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    go.store(false);
    for (auto &u : users) u.join();
    CHECK(threads() == t0); // the stack thread is gone after close
    rknp_parent_free(p);
}

TEST_CASE("after close, adding a forward that existed is STATE, not a duplicate") {
    TempDir dir;
    rknp_parent *p = started(dir, 12345);
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(bind(s, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
    REQUIRE(getsockname(s, reinterpret_cast<sockaddr *>(&a), &len) == 0);
    close(s); // a free loopback port
    rknp_forward f;
    rknp_forward_init(&f, sizeof f);
    f.host_addr = "127.0.0.1";
    f.host_port = ntohs(a.sin_port);
    f.guest_port = 80;
    uint32_t id;
    REQUIRE(rknp_parent_add_forward(p, &f, &id, nullptr) == RKNP_OK);
    rknp_parent_close(p);
    rknp_error *err = nullptr;
    CHECK(rknp_parent_add_forward(p, &f, &id, &err) == RKNP_ERR_STATE);
    rknp_error_free(err);
    rknp_parent_free(p);
}
