// SPDX-License-Identifier: Apache-2.0

// The ABI's versioned structs: each minor's frozen size, and the only code
// that reads a caller's struct or writes into one. A caller's struct is
// taken as the newest minor whose frozen size fits in its struct_size
// (rknp.h, "Versioned structs"): never a byte past struct_size, never a
// field of a newer minor out of an older header's tail padding, defaults
// for what an older caller lacks.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>

#include "common/error.hpp"
#include "rknp.h"

namespace rknp {

// A field inserted or resized in the middle of a released struct changes
// these on every LP64 target: the layout is part of the contract.
static_assert(sizeof(void *) != 8 || RKNP_CONFIG_SIZE_1_0 == 84);
static_assert(sizeof(void *) != 8 || RKNP_CONFIG_SIZE_1_2 == 86);
static_assert(sizeof(void *) != 8 || RKNP_CONFIG_SIZE_1_3 == 96);
static_assert(sizeof(void *) != 8 || RKNP_CONFIG_SIZE_1_4 == 104);
static_assert(sizeof(void *) != 8 || RKNP_CONFIG_SIZE_1_5 == 112);
static_assert(sizeof(void *) != 8 || RKNP_CONFIG_SIZE_1_6 == 160);
static_assert(sizeof(void *) != 8 || RKNP_CONFIG_SIZE_1_7 == 208);
static_assert(sizeof(void *) != 8 || RKNP_NETWORK_SIZE_1_0 == 202);
static_assert(sizeof(void *) != 8 || RKNP_NETWORK_SIZE_1_3 == 234);
static_assert(sizeof(void *) != 8 || RKNP_STATS_SIZE_1_0 == 56);
static_assert(sizeof(void *) != 8 || RKNP_STATS_SIZE_1_2 == 72);
static_assert(sizeof(void *) != 8 || RKNP_STATS_SIZE_1_3 == 132);
static_assert(sizeof(void *) != 8 || RKNP_STATS_SIZE_1_4 == 144);
static_assert(sizeof(void *) != 8 || RKNP_STATS_SIZE_1_5 == 160);
static_assert(sizeof(void *) != 8 || RKNP_STATS_SIZE_1_7 == 240);
static_assert(sizeof(void *) != 8 || RKNP_FORWARD_SIZE_1_1 == 32);
static_assert(sizeof(void *) != 8 || RKNP_FORWARD_SIZE_1_7 == 40);
static_assert(sizeof(void *) != 8 || RKNP_FORWARD_INFO_SIZE_1_1 == 82);
static_assert(RKNP_FORWARD_INFO_SIZE_1_7 == 132);
static_assert(sizeof(void *) != 8 || RKNP_CHILD_OPTIONS_SIZE_1_0 == 32);
static_assert(sizeof(void *) != 8 || RKNP_CHILD_OPTIONS_SIZE_1_2 == 33);
static_assert(sizeof(void *) != 8 || RKNP_API_V1_SIZE_1_0 == 144);
static_assert(sizeof(void *) != 8 || RKNP_API_V1_SIZE_1_1 == 176);

// The layout rule since 1.4: a minor starts at the previous header's
// sizeof (LP64: rknp_config 96 in 1.3 and 104 in 1.4, rknp_stats 136 in
// 1.3 and 144 in 1.4), so no older caller's tail padding lies under a
// newer field ...
static_assert(sizeof(void *) != 8 ||
              offsetof(rknp_config, tcp_peek_mode) == 96);
static_assert(sizeof(void *) != 8 ||
              offsetof(rknp_stats, tcp_peek_mode) == 136);
static_assert(offsetof(rknp_config, udp_path) == RKNP_CONFIG_SIZE_1_4);
static_assert(offsetof(rknp_config, guest_address) == RKNP_CONFIG_SIZE_1_5);
static_assert(offsetof(rknp_config, ipv6_network) == RKNP_CONFIG_SIZE_1_6);
// dns_address6 came late in 1.7, after its reserved block: a caller built
// against the earlier 1.7 header (struct_size up to reserved_1_7) keeps
// its layout.
static_assert(offsetof(rknp_config, dns_address6) ==
              offsetof(rknp_config, reserved_1_7) + 7);
static_assert(offsetof(rknp_stats, udp_fast_flows) == RKNP_STATS_SIZE_1_4);
static_assert(offsetof(rknp_stats, tcp_forward_accepted) == RKNP_STATS_SIZE_1_5);
static_assert(offsetof(rknp_forward, flags) == RKNP_FORWARD_SIZE_1_1);
static_assert(offsetof(rknp_forward_info, guest_addr_full) ==
              offsetof(rknp_forward_info, reserved_1_1) + 2);
// ... and every struct ends on a member (its reserved block), not on tail
// padding: the next minor starts at this header's sizeof.
static_assert(sizeof(rknp_config) == RKNP_CONFIG_SIZE_1_7);
static_assert(sizeof(rknp_stats) == RKNP_STATS_SIZE_1_7);
static_assert(sizeof(rknp_network) ==
              offsetof(rknp_network, reserved_1_3) + 2);
static_assert(sizeof(rknp_forward) == RKNP_FORWARD_SIZE_1_7);
static_assert(sizeof(rknp_forward_info) == RKNP_FORWARD_INFO_SIZE_1_7);
static_assert(sizeof(rknp_child_options) ==
              offsetof(rknp_child_options, reserved_1_2) + 7);
static_assert(sizeof(rknp_api_v1) == RKNP_API_V1_SIZE_1_1);

// Each versioned struct's frozen sizes, oldest first, and its name for
// error messages.
template <typename T> struct Versions;
template <> struct Versions<rknp_config> {
    static constexpr const char *name = "rknp_config";
    static constexpr std::array<size_t, 7> sizes{
        RKNP_CONFIG_SIZE_1_0, RKNP_CONFIG_SIZE_1_2, RKNP_CONFIG_SIZE_1_3,
        RKNP_CONFIG_SIZE_1_4, RKNP_CONFIG_SIZE_1_5, RKNP_CONFIG_SIZE_1_6,
        RKNP_CONFIG_SIZE_1_7};
};
template <> struct Versions<rknp_network> {
    static constexpr const char *name = "rknp_network";
    static constexpr std::array<size_t, 2> sizes{RKNP_NETWORK_SIZE_1_0,
                                                 RKNP_NETWORK_SIZE_1_3};
};
template <> struct Versions<rknp_stats> {
    static constexpr const char *name = "rknp_stats";
    static constexpr std::array<size_t, 6> sizes{
        RKNP_STATS_SIZE_1_0, RKNP_STATS_SIZE_1_2, RKNP_STATS_SIZE_1_3,
        RKNP_STATS_SIZE_1_4, RKNP_STATS_SIZE_1_5, RKNP_STATS_SIZE_1_7};
};
template <> struct Versions<rknp_forward> {
    static constexpr const char *name = "rknp_forward";
    static constexpr std::array<size_t, 2> sizes{RKNP_FORWARD_SIZE_1_1,
                                                 RKNP_FORWARD_SIZE_1_7};
};
template <> struct Versions<rknp_forward_info> {
    static constexpr const char *name = "rknp_forward_info";
    static constexpr std::array<size_t, 2> sizes{RKNP_FORWARD_INFO_SIZE_1_1,
                                                 RKNP_FORWARD_INFO_SIZE_1_7};
};
template <> struct Versions<rknp_child_options> {
    static constexpr const char *name = "rknp_child_options";
    static constexpr std::array<size_t, 2> sizes{RKNP_CHILD_OPTIONS_SIZE_1_0,
                                                 RKNP_CHILD_OPTIONS_SIZE_1_2};
};

// Frozen sizes grow with each minor and fit in this header's struct.
template <typename T> constexpr bool sizes_are_ordered() {
    const auto &s = Versions<T>::sizes;
    for (size_t i = 1; i < s.size(); ++i)
        if (s[i] <= s[i - 1]) return false;
    return s.front() > sizeof(uint32_t) && s.back() <= sizeof(T);
}
static_assert(sizes_are_ordered<rknp_config>());
static_assert(sizes_are_ordered<rknp_network>());
static_assert(sizes_are_ordered<rknp_stats>());
static_assert(sizes_are_ordered<rknp_forward>());
static_assert(sizes_are_ordered<rknp_forward_info>());
static_assert(sizes_are_ordered<rknp_child_options>());

// The struct_size a caller put at the start of a versioned struct.
inline uint32_t struct_size_of(const void *s) {
    uint32_t n;
    std::memcpy(&n, s, sizeof n);
    return n;
}

// The bytes of a struct_size-byte struct that hold fields: the newest
// frozen size within struct_size. Below the first version it throws
// Error(RKNP_ERR_INVALID_ARGUMENT) naming the struct.
template <typename T> size_t field_bytes(uint32_t struct_size) {
    const auto &sizes = Versions<T>::sizes;
    if (struct_size < sizes.front())
        throw_invalid("invalid " + std::string(Versions<T>::name) +
                      ".struct_size " + std::to_string(struct_size) +
                      ": must be at least " + std::to_string(sizes.front()) +
                      " (sizeof(" + Versions<T>::name +
                      ") in any ABI 1.x header)");
    return *std::prev(std::upper_bound(sizes.begin(), sizes.end(),
                                       size_t(struct_size)));
}

// A caller-filled struct as this library sees it: the fields of the
// caller's minor over `defaults`; padding and a newer caller's tail
// ignored.
template <typename T> T read_versioned(const T &in, T defaults) {
    size_t n = field_bytes<T>(struct_size_of(&in));
    std::memcpy(static_cast<void *>(&defaults), &in, n);
    return defaults;
}

// Copies the fields of the caller's minor from a library-filled `full`
// into the caller's struct at out, zeroes the rest of its struct_size and
// keeps its struct_size. (out is untyped: a caller's array of
// rknp_forward_info steps by its own struct_size.)
template <typename T> void write_versioned(void *out, const T &full) {
    uint32_t size = struct_size_of(out);
    size_t n = field_bytes<T>(size);
    auto *dst = static_cast<unsigned char *>(out);
    auto *src = reinterpret_cast<const unsigned char *>(&full);
    std::memcpy(dst + sizeof size, src + sizeof size, n - sizeof size);
    std::memset(dst + n, 0, size - n);
}

// The *_init functions: clears the caller's struct_size bytes, then sets
// the defaults of the caller's minor and struct_size.
template <typename T>
rknp_status init_versioned(T *s, uint32_t struct_size, const T &defaults) {
    if (s == nullptr || struct_size < Versions<T>::sizes.front())
        return RKNP_ERR_INVALID_ARGUMENT;
    size_t n = field_bytes<T>(struct_size);
    std::memset(static_cast<void *>(s), 0, struct_size);
    std::memcpy(static_cast<void *>(s), &defaults, n);
    std::memcpy(static_cast<void *>(s), &struct_size, sizeof struct_size);
    return RKNP_OK;
}

} // namespace rknp
