// SPDX-License-Identifier: Apache-2.0

// The ABI's versioned structs: each minor's frozen size, and the only code
// that reads a caller's struct or writes into one (never past the caller's
// struct_size, defaults for what an older caller lacks).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/error.hpp"
#include "rknp.h"

namespace rknp {

// A field inserted or resized in the middle of a released struct changes
// these on every LP64 target: the layout is part of the contract.
static_assert(sizeof(void *) != 8 || RKNP_CONFIG_SIZE_1_0 == 84);
static_assert(sizeof(void *) != 8 || RKNP_CONFIG_SIZE_1_2 == 86);
static_assert(sizeof(void *) != 8 || RKNP_CONFIG_SIZE_1_3 == 96);
static_assert(sizeof(void *) != 8 || RKNP_NETWORK_SIZE_1_0 == 202);
static_assert(sizeof(void *) != 8 || RKNP_NETWORK_SIZE_1_3 == 234);
static_assert(sizeof(void *) != 8 || RKNP_STATS_SIZE_1_0 == 56);
static_assert(sizeof(void *) != 8 || RKNP_STATS_SIZE_1_2 == 72);
static_assert(sizeof(void *) != 8 || RKNP_STATS_SIZE_1_3 == 132);
static_assert(sizeof(void *) != 8 || RKNP_FORWARD_SIZE_1_1 == 32);
static_assert(sizeof(void *) != 8 || RKNP_FORWARD_INFO_SIZE_1_1 == 82);
static_assert(sizeof(void *) != 8 || RKNP_CHILD_OPTIONS_SIZE_1_0 == 32);
static_assert(sizeof(void *) != 8 || RKNP_CHILD_OPTIONS_SIZE_1_2 == 33);
static_assert(sizeof(void *) != 8 || RKNP_API_V1_SIZE_1_0 == 144);
static_assert(sizeof(void *) != 8 || RKNP_API_V1_SIZE_1_1 == 176);
// Each minor only appends: the newest size is the whole struct.
static_assert(sizeof(rknp_api_v1) == RKNP_API_V1_SIZE_1_1);

// The struct_size a caller put at the start of a versioned struct.
inline uint32_t struct_size_of(const void *s) {
    uint32_t n;
    std::memcpy(&n, s, sizeof n);
    return n;
}

// Throws Error(RKNP_ERR_INVALID_ARGUMENT) unless struct_size covers the
// struct's first version.
inline void check_struct_size(uint32_t struct_size, size_t first_version,
                              const char *name) {
    if (struct_size < first_version)
        throw_invalid("invalid " + std::string(name) + ".struct_size " +
                      std::to_string(struct_size) + ": must be at least " +
                      std::to_string(first_version) + " (sizeof(" + name +
                      ") in any ABI 1.x header)");
}

// A caller-filled struct as this library sees it: the caller's fields up to
// its struct_size over `defaults`; a newer caller's unknown tail ignored.
template <typename T>
T read_versioned(const T &in, T defaults, size_t first_version,
                 const char *name) {
    uint32_t size = struct_size_of(&in);
    check_struct_size(size, first_version, name);
    std::memcpy(static_cast<void *>(&defaults), &in,
                std::min<size_t>(size, sizeof(T)));
    return defaults;
}

// Copies a library-filled struct into the caller's of struct_size bytes at
// out: the fields both know, zeroes beyond this library's struct, and the
// caller's struct_size kept.
inline void write_versioned(void *out, const void *full, size_t full_size,
                            size_t first_version, const char *name) {
    uint32_t size = struct_size_of(out);
    check_struct_size(size, first_version, name);
    auto *dst = static_cast<unsigned char *>(out);
    auto *src = static_cast<const unsigned char *>(full);
    size_t known = std::min<size_t>(size, full_size);
    std::memcpy(dst + sizeof size, src + sizeof size, known - sizeof size);
    if (size > known) std::memset(dst + known, 0, size - known);
}

template <typename T>
void write_versioned(T &out, const T &full, size_t first_version,
                     const char *name) {
    write_versioned(&out, &full, sizeof(T), first_version, name);
}

// The *_init functions: clears the caller's struct_size bytes, then sets
// the defaults this library knows and struct_size.
template <typename T>
rknp_status init_versioned(T *s, uint32_t struct_size, const T &defaults,
                           size_t first_version) {
    if (s == nullptr || struct_size < first_version)
        return RKNP_ERR_INVALID_ARGUMENT;
    std::memset(static_cast<void *>(s), 0, struct_size);
    std::memcpy(static_cast<void *>(s), &defaults,
                std::min<size_t>(struct_size, sizeof(T)));
    std::memcpy(static_cast<void *>(s), &struct_size, sizeof struct_size);
    return RKNP_OK;
}

} // namespace rknp
