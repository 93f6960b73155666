// SPDX-License-Identifier: Apache-2.0

// The versioned-struct contract as callers built against other minors see
// it: an older caller's shorter struct works with defaults for the rest and
// its tail padding is never read as a newer field, a newer caller's longer
// one is accepted with its unknown tail ignored, the library never reads or
// writes past the caller's struct_size, and the static initialisers give
// what the *_init functions give.
#include <doctest/doctest.h>
#include <slirp/libslirp.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../unit/temp_dir.hpp"

#include "rknp.h"

namespace {

constexpr unsigned char kGuard = 0xA5;
constexpr size_t kSlack = 64;

// A caller's struct of `size` bytes inside a buffer whose bytes beyond it
// are guards the library must neither read as fields nor overwrite.
template <typename T> struct Sized {
    std::vector<unsigned char> buf;
    explicit Sized(size_t size) : buf(std::max(size, sizeof(T)) + kSlack, kGuard) {
        uint32_t s = uint32_t(size);
        std::memcpy(buf.data(), &s, sizeof s);
    }
    T *get() { return reinterpret_cast<T *>(buf.data()); }
    bool guards_intact(size_t from) const {
        for (size_t i = from; i < buf.size(); ++i)
            if (buf[i] != kGuard) return false;
        return true;
    }
    bool zero(size_t from, size_t to) const {
        for (size_t i = from; i < to; ++i)
            if (buf[i] != 0) return false;
        return true;
    }
};

std::string message(rknp_error *err) {
    std::string m = rknp_error_message(err);
    rknp_error_free(err);
    return m;
}

// sizeof(T) in the header of the minor whose frozen size is `frozen`: the
// struct's alignment never changed, and its sizeof is a multiple of it.
template <typename T> uint32_t header_sizeof(size_t frozen) {
    return uint32_t((frozen + alignof(T) - 1) / alignof(T) * alignof(T));
}

// A caller's struct of struct_size bytes whose first `fields` bytes are
// `set` (the values its minor has) and whose every other byte, in its
// padding and past its end, is `poison`.
template <typename T> struct Poisoned {
    std::vector<unsigned char> buf;
    unsigned char poison;
    Poisoned(const T &set, size_t fields, uint32_t struct_size,
             unsigned char poison_byte)
        : buf(sizeof(T) + kSlack, poison_byte), poison(poison_byte) {
        std::memcpy(buf.data(), &set, fields);
        std::memcpy(buf.data(), &struct_size, sizeof struct_size);
    }
    T *get() { return reinterpret_cast<T *>(buf.data()); }
};

// The stack thread's sandbox bits of a parent started from cfg. (Failure
// messages use rknp_error_message, not message(): doctest may evaluate a
// message more than once, and message() frees the error.)
// Valgrind's preloaded core is in LD_PRELOAD of every program it runs.
bool under_valgrind() {
    const char *preload = std::getenv("LD_PRELOAD");
    return preload != nullptr && std::strstr(preload, "vgpreload") != nullptr;
}

uint32_t started_sandbox(const rknp_config *cfg) {
    TempDir dir;
    rknp_parent *p = nullptr;
    rknp_error *err = nullptr;
    REQUIRE_MESSAGE(rknp_parent_new(cfg, &p, &err) == RKNP_OK,
                    rknp_error_message(err));
    REQUIRE(rknp_parent_start(p, dir.path().c_str(), 12345, nullptr) ==
            RKNP_OK);
    rknp_stats st;
    st.struct_size = sizeof st;
    REQUIRE(rknp_parent_stats(p, &st, nullptr) == RKNP_OK);
    rknp_parent_free(p);
    return st.sandbox;
}

// A library-filled struct at an older minor's size: the fields of that
// minor as a full-size caller gets them, zeroes up to its struct_size and
// the poison untouched past it. fill(T*) makes the call.
template <typename T, typename Fill>
void check_old_output(size_t frozen, unsigned char poison, Fill fill) {
    CAPTURE(frozen);
    CAPTURE(int(poison));
    T full;
    std::memset(&full, 0x5A, sizeof full);
    full.struct_size = sizeof full;
    REQUIRE(fill(&full) == RKNP_OK);
    const uint32_t size = header_sizeof<T>(frozen);
    std::vector<unsigned char> buf(sizeof(T) + kSlack, poison);
    std::memcpy(buf.data(), &size, sizeof size);
    REQUIRE(fill(reinterpret_cast<T *>(buf.data())) == RKNP_OK);
    CHECK(std::memcmp(buf.data(), &size, sizeof size) == 0);
    CHECK(std::memcmp(buf.data() + sizeof size,
                      reinterpret_cast<unsigned char *>(&full) + sizeof size,
                      frozen - sizeof size) == 0);
    for (size_t i = frozen; i < size; ++i) CHECK(buf[i] == 0);
    for (size_t i = size; i < buf.size(); ++i) CHECK(buf[i] == poison);
}

} // namespace

TEST_CASE("the frozen sizes grow with each minor and the table says so") {
    CHECK(RKNP_CONFIG_SIZE_1_0 < RKNP_CONFIG_SIZE_1_2);
    CHECK(RKNP_CONFIG_SIZE_1_2 < RKNP_CONFIG_SIZE_1_3);
    CHECK(RKNP_CONFIG_SIZE_1_3 < RKNP_CONFIG_SIZE_1_4);
    CHECK(RKNP_CONFIG_SIZE_1_4 < RKNP_CONFIG_SIZE_1_5);
    CHECK(RKNP_CONFIG_SIZE_1_5 < RKNP_CONFIG_SIZE_1_6);
    CHECK(RKNP_CONFIG_SIZE_1_6 < RKNP_CONFIG_SIZE_1_7);
    CHECK(RKNP_NETWORK_SIZE_1_0 < RKNP_NETWORK_SIZE_1_3);
    CHECK(RKNP_STATS_SIZE_1_2 < RKNP_STATS_SIZE_1_3);
    CHECK(RKNP_STATS_SIZE_1_3 < RKNP_STATS_SIZE_1_4);
    CHECK(RKNP_STATS_SIZE_1_4 < RKNP_STATS_SIZE_1_5);
    CHECK(RKNP_STATS_SIZE_1_5 < RKNP_STATS_SIZE_1_7);
    // From 1.4 a minor's sizeof is its frozen size, beyond every older
    // header's sizeof (which included tail padding).
    CHECK(sizeof(rknp_config) == RKNP_CONFIG_SIZE_1_7);
    CHECK(offsetof(rknp_config, guest_address) == RKNP_CONFIG_SIZE_1_5);
    CHECK(offsetof(rknp_config, ipv6_network) == RKNP_CONFIG_SIZE_1_6);
    CHECK(header_sizeof<rknp_config>(RKNP_CONFIG_SIZE_1_3) <
          sizeof(rknp_config));
    CHECK(offsetof(rknp_config, tcp_peek_mode) >=
          header_sizeof<rknp_config>(RKNP_CONFIG_SIZE_1_3));
    CHECK(header_sizeof<rknp_config>(RKNP_CONFIG_SIZE_1_4) ==
          RKNP_CONFIG_SIZE_1_4);
    CHECK(offsetof(rknp_config, udp_path) == RKNP_CONFIG_SIZE_1_4);
    CHECK(sizeof(rknp_stats) == RKNP_STATS_SIZE_1_7);
    CHECK(offsetof(rknp_stats, tcp_forward_accepted) == RKNP_STATS_SIZE_1_5);
    CHECK(offsetof(rknp_stats, tcp_peek_mode) >=
          header_sizeof<rknp_stats>(RKNP_STATS_SIZE_1_3));
    CHECK(header_sizeof<rknp_stats>(RKNP_STATS_SIZE_1_4) ==
          RKNP_STATS_SIZE_1_4);
    CHECK(offsetof(rknp_stats, udp_fast_flows) == RKNP_STATS_SIZE_1_4);
    auto *api = static_cast<const rknp_api_v1 *>(rknp_get_api(1));
    REQUIRE(api != nullptr);
    CHECK(api->abi_minor == 7);
    CHECK(rknp_abi_version() == ((1u << 16) | 7u));
    // The 1.1 block (forwards) lies inside the table the library reports.
    CHECK(api->struct_size >= RKNP_API_V1_SIZE_1_1);
    CHECK((api->parent_list_forwards != nullptr));
}

TEST_CASE("a 1.0 caller's rknp_config: init stops at its size, the rest defaults") {
    Sized<rknp_config> old(RKNP_CONFIG_SIZE_1_0);
    REQUIRE(rknp_config_init(old.get(), RKNP_CONFIG_SIZE_1_0) == RKNP_OK);
    CHECK(old.get()->struct_size == RKNP_CONFIG_SIZE_1_0);
    CHECK(old.get()->mtu == 65520);
    CHECK(old.get()->handover_timeout_ms == 10000);
    // enable_dhcp (1.2) lies past the caller's struct: untouched guards.
    CHECK(old.guards_intact(RKNP_CONFIG_SIZE_1_0));
    // ... and never read: 0xA5 would be refused as a flag value.
    rknp_parent *p = nullptr;
    rknp_error *err = nullptr;
    REQUIRE_MESSAGE(rknp_parent_new(old.get(), &p, &err) == RKNP_OK,
                    message(err));
    rknp_network net{};
    net.struct_size = sizeof net;
    REQUIRE(rknp_parent_network(p, &net, nullptr) == RKNP_OK);
    CHECK(net.mtu == 65520);
    rknp_parent_free(p);
}

TEST_CASE("the current struct reads its 1.2 field: a bad enable_dhcp is refused") {
    rknp_config cfg;
    REQUIRE(rknp_config_init(&cfg, sizeof cfg) == RKNP_OK);
    CHECK(cfg.enable_dhcp == 0);
    cfg.enable_dhcp = 7;
    rknp_parent *p = nullptr;
    rknp_error *err = nullptr;
    CHECK(rknp_parent_new(&cfg, &p, &err) == RKNP_ERR_INVALID_ARGUMENT);
    CHECK(message(err) == "invalid rknp_config: flags must be 0 or 1");
    cfg.enable_dhcp = 1;
    REQUIRE(rknp_parent_new(&cfg, &p, nullptr) == RKNP_OK);
    rknp_parent_free(p);
}

TEST_CASE("a newer caller's longer rknp_config: unknown tail ignored") {
    const size_t size = sizeof(rknp_config) + 32;
    Sized<rknp_config> big(size);
    REQUIRE(rknp_config_init(big.get(), uint32_t(size)) == RKNP_OK);
    CHECK(big.get()->struct_size == size); // the caller's size is kept
    CHECK(big.zero(sizeof(rknp_config), size)); // init cleared all of it
    CHECK(big.guards_intact(size));
    // The newer caller sets fields this library has never heard of.
    std::memset(big.buf.data() + sizeof(rknp_config), 0x77, 32);
    big.get()->mtu = 1500;
    rknp_parent *p = nullptr;
    rknp_error *err = nullptr;
    REQUIRE_MESSAGE(rknp_parent_new(big.get(), &p, &err) == RKNP_OK,
                    message(err));
    rknp_network net{};
    net.struct_size = sizeof net;
    REQUIRE(rknp_parent_network(p, &net, nullptr) == RKNP_OK);
    CHECK(net.mtu == 1500);
    rknp_parent_free(p);
}

TEST_CASE("structs shorter than their first version are refused by name") {
    Sized<rknp_config> tiny(RKNP_CONFIG_SIZE_1_0 - 1);
    CHECK(rknp_config_init(tiny.get(), RKNP_CONFIG_SIZE_1_0 - 1) ==
          RKNP_ERR_INVALID_ARGUMENT);
    CHECK(tiny.guards_intact(sizeof(uint32_t))); // nothing written
    rknp_config cfg;
    REQUIRE(rknp_config_init(&cfg, sizeof cfg) == RKNP_OK);
    cfg.struct_size = RKNP_CONFIG_SIZE_1_0 - 1;
    rknp_parent *p = nullptr;
    rknp_error *err = nullptr;
    CHECK(rknp_parent_new(&cfg, &p, &err) == RKNP_ERR_INVALID_ARGUMENT);
    CHECK(message(err) == "invalid rknp_config.struct_size 83: must be at "
                          "least 84 (sizeof(rknp_config) in any ABI 1.x "
                          "header)");
    rknp_forward f;
    CHECK(rknp_forward_init(&f, RKNP_FORWARD_SIZE_1_1 - 1) ==
          RKNP_ERR_INVALID_ARGUMENT);
    rknp_child_options o;
    CHECK(rknp_child_options_init(&o, RKNP_CHILD_OPTIONS_SIZE_1_0 - 1) ==
          RKNP_ERR_INVALID_ARGUMENT);
}

TEST_CASE("output structs: filled up to the caller's size, zeroed beyond ours") {
    rknp_config cfg;
    REQUIRE(rknp_config_init(&cfg, sizeof cfg) == RKNP_OK);
    cfg.mtu = 9000;
    rknp_parent *p = nullptr;
    REQUIRE(rknp_parent_new(&cfg, &p, nullptr) == RKNP_OK);

    SUBCASE("rknp_network at its 1.0 size") {
        Sized<rknp_network> net(RKNP_NETWORK_SIZE_1_0);
        REQUIRE(rknp_parent_network(p, net.get(), nullptr) == RKNP_OK);
        CHECK(net.get()->struct_size == RKNP_NETWORK_SIZE_1_0);
        CHECK(net.get()->mtu == 9000);
        CHECK(std::string(net.get()->ip) == "10.0.2.100");
        CHECK(net.guards_intact(RKNP_NETWORK_SIZE_1_0));
    }
    SUBCASE("rknp_network at its 1.3 size names the loaded libslirp") {
        Sized<rknp_network> net(RKNP_NETWORK_SIZE_1_3);
        REQUIRE(rknp_parent_network(p, net.get(), nullptr) == RKNP_OK);
        CHECK(std::string(net.get()->libslirp_version) ==
              slirp_version_string());
        CHECK(!std::string(net.get()->libslirp_version).empty());
        CHECK(net.guards_intact(RKNP_NETWORK_SIZE_1_3));
    }
    SUBCASE("rknp_network from a newer caller") {
        const size_t size = sizeof(rknp_network) + 24;
        Sized<rknp_network> net(size);
        REQUIRE(rknp_parent_network(p, net.get(), nullptr) == RKNP_OK);
        CHECK(net.get()->struct_size == size);
        CHECK(std::string(net.get()->gateway) == "10.0.2.2");
        CHECK(net.zero(sizeof(rknp_network), size));
        CHECK(net.guards_intact(size));
    }
    SUBCASE("rknp_stats at its 1.0 size and larger") {
        // A 1.0 caller has no room for the 1.2 counters: none written.
        Sized<rknp_stats> st(RKNP_STATS_SIZE_1_0);
        REQUIRE(rknp_parent_stats(p, st.get(), nullptr) == RKNP_OK);
        CHECK(st.get()->frames_dropped == 0);
        CHECK(st.guards_intact(RKNP_STATS_SIZE_1_0));
        const size_t size = sizeof(rknp_stats) + 16;
        Sized<rknp_stats> big(size);
        REQUIRE(rknp_parent_stats(p, big.get(), nullptr) == RKNP_OK);
        CHECK(big.zero(sizeof(rknp_stats), size));
        CHECK(big.guards_intact(size));
    }
    SUBCASE("rknp_stats at its 1.4 size: no 1.5 counter written") {
        Sized<rknp_stats> st(RKNP_STATS_SIZE_1_4);
        REQUIRE(rknp_parent_stats(p, st.get(), nullptr) == RKNP_OK);
        CHECK(st.get()->struct_size == RKNP_STATS_SIZE_1_4);
        CHECK(st.get()->tcp_peek_mode == 0); // not started
        CHECK(st.guards_intact(RKNP_STATS_SIZE_1_4));
    }
    SUBCASE("rknp_stats at its 1.5 size: the UDP counters, 0 until started") {
        Sized<rknp_stats> st(RKNP_STATS_SIZE_1_5);
        REQUIRE(rknp_parent_stats(p, st.get(), nullptr) == RKNP_OK);
        CHECK(st.get()->udp_fast_flows == 0);
        CHECK(st.get()->udp_fast_dropped == 0);
        CHECK(st.guards_intact(RKNP_STATS_SIZE_1_5)); // no 1.7 byte written
    }
    SUBCASE("rknp_stats at its 1.7 size: the forwards' counters, 0 until started") {
        Sized<rknp_stats> st(RKNP_STATS_SIZE_1_7);
        REQUIRE(rknp_parent_stats(p, st.get(), nullptr) == RKNP_OK);
        CHECK(st.get()->struct_size == RKNP_STATS_SIZE_1_7);
        CHECK(st.get()->tcp_forward_accepted == 0);
        CHECK(st.get()->udp_forward_clients == 0);
        CHECK(st.get()->udp_forward_full == 0);
        CHECK(st.guards_intact(RKNP_STATS_SIZE_1_7));
    }
    SUBCASE("too small") {
        Sized<rknp_stats> st(8);
        rknp_error *err = nullptr;
        CHECK(rknp_parent_stats(p, st.get(), &err) == RKNP_ERR_INVALID_ARGUMENT);
        CHECK(message(err) == "invalid rknp_stats.struct_size 8: must be at "
                              "least 56 (sizeof(rknp_stats) in any ABI 1.x "
                              "header)");
        CHECK(st.guards_intact(sizeof(uint32_t)));
    }
    rknp_parent_free(p);
}

TEST_CASE("a 1.0-size rknp_child_options is read, its missing tail is not") {
    // Options are read before the opaque pairs: the error that follows
    // shows they were accepted.
    Sized<rknp_child_options> o(RKNP_CHILD_OPTIONS_SIZE_1_0);
    REQUIRE(rknp_child_options_init(o.get(), RKNP_CHILD_OPTIONS_SIZE_1_0) ==
            RKNP_OK);
    CHECK(o.guards_intact(RKNP_CHILD_OPTIONS_SIZE_1_0));
    rknp_kv kv[] = {{"rknp.ifname", "tap0"}};
    rknp_error *err = nullptr;
    CHECK(rknp_child_configure(kv, 1, o.get(), nullptr, 0, &err) ==
          RKNP_ERR_INVALID_ARGUMENT);
    CHECK(message(err).find("rknp.socket") != std::string::npos);
    o.get()->struct_size = 8;
    CHECK(rknp_child_configure(kv, 1, o.get(), nullptr, 0, &err) ==
          RKNP_ERR_INVALID_ARGUMENT);
    CHECK(message(err).find("rknp_child_options.struct_size 8") !=
          std::string::npos);
}

TEST_CASE("the 1.2 child option link_only is read and checked") {
    rknp_child_options o;
    REQUIRE(rknp_child_options_init(&o, sizeof o) == RKNP_OK);
    CHECK(o.link_only == 0);
    o.link_only = 2;
    rknp_kv kv[] = {{"rknp.ifname", "tap0"}};
    rknp_error *err = nullptr;
    CHECK(rknp_child_configure(kv, 1, &o, nullptr, 0, &err) ==
          RKNP_ERR_INVALID_ARGUMENT);
    CHECK(message(err) ==
          "invalid rknp_child_options.link_only \"2\": must be 0 or 1");
}

TEST_CASE("the 1.5 field udp_path is read and checked; a 1.4 caller gets the default") {
    rknp_config cfg;
    REQUIRE(rknp_config_init(&cfg, sizeof cfg) == RKNP_OK);
    CHECK(cfg.udp_path == RKNP_UDP_PATH_DEFAULT);
    for (uint8_t path : {RKNP_UDP_PATH_DEFAULT, RKNP_UDP_PATH_FAST,
                         RKNP_UDP_PATH_SLIRP}) {
        CAPTURE(int(path));
        cfg.udp_path = path;
        rknp_parent *p = nullptr;
        rknp_error *err = nullptr;
        CHECK_MESSAGE(rknp_parent_new(&cfg, &p, &err) == RKNP_OK,
                      rknp_error_message(err));
        rknp_parent_free(p);
    }
    cfg.udp_path = 3;
    rknp_parent *p = nullptr;
    rknp_error *err = nullptr;
    CHECK(rknp_parent_new(&cfg, &p, &err) == RKNP_ERR_INVALID_ARGUMENT);
    CHECK(p == nullptr);
    CHECK(message(err) == "invalid udp_path \"3\": must be "
                          "RKNP_UDP_PATH_DEFAULT, _FAST or _SLIRP");
    // The same bytes from a 1.4 caller: udp_path lies past its struct and
    // is never read.
    cfg.struct_size = RKNP_CONFIG_SIZE_1_4;
    CHECK_MESSAGE(rknp_parent_new(&cfg, &p, &err) == RKNP_OK,
                  rknp_error_message(err));
    rknp_parent_free(p);
    // A 1.4 caller's init stops at its size.
    Sized<rknp_config> old(RKNP_CONFIG_SIZE_1_4);
    REQUIRE(rknp_config_init(old.get(), RKNP_CONFIG_SIZE_1_4) == RKNP_OK);
    CHECK(old.get()->struct_size == RKNP_CONFIG_SIZE_1_4);
    CHECK(old.guards_intact(RKNP_CONFIG_SIZE_1_4));
}

// Static storage: the initialisers' padding bytes are zero like those
// *_init clears, so the whole structs compare.
static const rknp_config kConfigInit = RKNP_CONFIG_INIT;
static const rknp_forward kForwardInit = RKNP_FORWARD_INIT;
static const rknp_child_options kChildOptionsInit = RKNP_CHILD_OPTIONS_INIT;

TEST_CASE("the static initialisers equal what the *_init functions give") {
    rknp_config cfg;
    std::memset(&cfg, 0xA5, sizeof cfg);
    REQUIRE(rknp_config_init(&cfg, sizeof cfg) == RKNP_OK);
    CHECK(kConfigInit.struct_size == sizeof(rknp_config));
    CHECK(kConfigInit.mtu == 65520);
    CHECK(kConfigInit.handover_timeout_ms == 10000);
    CHECK(kConfigInit.tcp_peek_mode == RKNP_TCP_PEEK_AUTO);
    CHECK(kConfigInit.udp_path == RKNP_UDP_PATH_DEFAULT);
    CHECK(std::memcmp(&cfg, &kConfigInit, sizeof cfg) == 0);

    rknp_forward fwd;
    std::memset(&fwd, 0xA5, sizeof fwd);
    REQUIRE(rknp_forward_init(&fwd, sizeof fwd) == RKNP_OK);
    CHECK(kForwardInit.protocol == RKNP_PROTO_TCP);
    CHECK(std::memcmp(&fwd, &kForwardInit, sizeof fwd) == 0);

    rknp_child_options opts;
    std::memset(&opts, 0xA5, sizeof opts);
    REQUIRE(rknp_child_options_init(&opts, sizeof opts) == RKNP_OK);
    CHECK(std::memcmp(&opts, &kChildOptionsInit, sizeof opts) == 0);

    // An automatic one is a valid config as it stands.
    rknp_config automatic = RKNP_CONFIG_INIT;
    rknp_parent *p = nullptr;
    rknp_error *err = nullptr;
    CHECK_MESSAGE(rknp_parent_new(&automatic, &p, &err) == RKNP_OK,
                  rknp_error_message(err));
    rknp_parent_free(p);
}

TEST_CASE("an old caller's rknp_config: poisoned padding is never read") {
    // Sandbox bits a default parent gets here: the poisoned ones must match.
    const uint32_t sandbox = started_sandbox(&kConfigInit);
    // Valgrind runs no seccomp filter and knows no Landlock call: there the
    // default parent has no sandbox bit and the 0x01 disable_sandbox poison
    // cannot show; everywhere else it must.
    if (!under_valgrind())
        REQUIRE((sandbox & RKNP_SANDBOX_SECCOMP) != 0);
    struct Case {
        uint32_t struct_size;
        size_t fields; // the minor it reads as
    };
    // 84: a 1.0 caller passing the frozen size. 88: sizeof in the 1.0 and
    // 1.2 headers, read as 1.2 (the 1.3 disable_sandbox at 86 and
    // max_flows at 88 are poison). 95: between 1.2 and 1.3. 96: 1.3.
    // 104: 1.4 (the 1.5 udp_path at 104 is poison, 0xA5 a refused value).
    // 112: 1.5 (the 1.6 address pointers at 112 are poison: never read).
    // 160: 1.6 (the 1.7 IPv6 pointers at 160 are poison: never read).
    for (Case c : {Case{uint32_t(RKNP_CONFIG_SIZE_1_0), RKNP_CONFIG_SIZE_1_0},
                   Case{88, RKNP_CONFIG_SIZE_1_2},
                   Case{95, RKNP_CONFIG_SIZE_1_2},
                   Case{uint32_t(RKNP_CONFIG_SIZE_1_3), RKNP_CONFIG_SIZE_1_3},
                   Case{uint32_t(RKNP_CONFIG_SIZE_1_4), RKNP_CONFIG_SIZE_1_4},
                   Case{uint32_t(RKNP_CONFIG_SIZE_1_5), RKNP_CONFIG_SIZE_1_5},
                   Case{uint32_t(RKNP_CONFIG_SIZE_1_6), RKNP_CONFIG_SIZE_1_6}}) {
        // 0xA5 in any flag, enum or limit is refused; 0x01 is a valid flag
        // (disable_sandbox: the sandbox bits show it) and an invalid
        // max_flows (0x01010101).
        for (unsigned char poison : {0xA5, 0x01}) {
            CAPTURE(c.struct_size);
            CAPTURE(int(poison));
            rknp_config set = RKNP_CONFIG_INIT;
            set.mtu = 1500;
            Poisoned<rknp_config> old(set, c.fields, c.struct_size, poison);
            rknp_parent *p = nullptr;
            rknp_error *err = nullptr;
            REQUIRE_MESSAGE(rknp_parent_new(old.get(), &p, &err) == RKNP_OK,
                            rknp_error_message(err));
            rknp_network net;
            net.struct_size = sizeof net;
            REQUIRE(rknp_parent_network(p, &net, nullptr) == RKNP_OK);
            CHECK(net.mtu == 1500);
            rknp_parent_free(p);
            CHECK(started_sandbox(old.get()) == sandbox);
        }
    }
}

TEST_CASE("struct_size 88 is also a 1.0 header's: its padding at 84 is read as 1.2, checked") {
    rknp_config set = RKNP_CONFIG_INIT;
    Poisoned<rknp_config> old(set, RKNP_CONFIG_SIZE_1_0, 88, 0xA5);
    rknp_parent *p = nullptr;
    rknp_error *err = nullptr;
    CHECK(rknp_parent_new(old.get(), &p, &err) == RKNP_ERR_INVALID_ARGUMENT);
    CHECK(message(err) == "invalid rknp_config: flags must be 0 or 1");
}

TEST_CASE("an old caller's rknp_child_options: poisoned padding is never read") {
    // Options are read before the opaque pairs: an error about the missing
    // socket pair shows they were accepted (0xA5 in link_only is not).
    for (size_t fields : {RKNP_CHILD_OPTIONS_SIZE_1_0,
                          RKNP_CHILD_OPTIONS_SIZE_1_2}) {
        for (unsigned char poison : {0xA5, 0x01}) {
            CAPTURE(fields);
            CAPTURE(int(poison));
            rknp_child_options set = RKNP_CHILD_OPTIONS_INIT;
            Poisoned<rknp_child_options> old(
                set, fields, header_sizeof<rknp_child_options>(fields),
                poison);
            rknp_kv kv[] = {{"rknp.ifname", "tap0"}};
            rknp_error *err = nullptr;
            CHECK(rknp_child_configure(kv, 1, old.get(), nullptr, 0, &err) ==
                  RKNP_ERR_INVALID_ARGUMENT);
            CHECK(message(err).find("rknp.socket") != std::string::npos);
        }
    }
}

TEST_CASE("an old caller's rknp_network and rknp_stats: its minor's fields, zeroes to its size") {
    rknp_config cfg = RKNP_CONFIG_INIT;
    cfg.mtu = 9000;
    cfg.enable_ipv6 = 1;
    rknp_parent *p = nullptr;
    REQUIRE(rknp_parent_new(&cfg, &p, nullptr) == RKNP_OK);
    auto network = [&](rknp_network *n) {
        return rknp_parent_network(p, n, nullptr);
    };
    auto stats = [&](rknp_stats *s) { return rknp_parent_stats(p, s, nullptr); };
    for (unsigned char poison : {0xA5, 0x01}) {
        for (size_t frozen : {RKNP_NETWORK_SIZE_1_0, RKNP_NETWORK_SIZE_1_3})
            check_old_output<rknp_network>(frozen, poison, network);
        for (size_t frozen : {RKNP_STATS_SIZE_1_0, RKNP_STATS_SIZE_1_2,
                              RKNP_STATS_SIZE_1_3, RKNP_STATS_SIZE_1_4,
                              RKNP_STATS_SIZE_1_5, RKNP_STATS_SIZE_1_7})
            check_old_output<rknp_stats>(frozen, poison, stats);
    }
    rknp_parent_free(p);
}
