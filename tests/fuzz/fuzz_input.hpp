// SPDX-License-Identifier: Apache-2.0

// A tiny reader over fuzz input bytes (libFuzzer's FuzzedDataProvider is
// clang-only; the replay build uses gcc). Reads past the end yield zeros
// or empty strings, so every input is a valid test case.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <span>
#include <string>

namespace fuzz {

class Input {
public:
    Input(const uint8_t *data, size_t size) : p_(data), n_(size) {}

    size_t left() const { return n_; }
    uint8_t u8() { return n_ > 0 ? (--n_, *p_++) : 0; }
    uint16_t u16() { return uint16_t(u8() | u8() << 8); }
    uint32_t u32() { return uint32_t(u16()) | uint32_t(u16()) << 16; }
    // Bytes up to the next NUL (consumed) or the end.
    std::string cstr() {
        std::string s;
        while (n_ > 0) {
            uint8_t c = u8();
            if (c == 0) break;
            s.push_back(char(c));
        }
        return s;
    }
    // Up to len bytes (fewer if the input ends: a truncated record).
    std::span<const uint8_t> bytes(size_t len) {
        if (len > n_) len = n_;
        std::span<const uint8_t> s(p_, len);
        p_ += len;
        n_ -= len;
        return s;
    }

private:
    const uint8_t *p_;
    size_t n_;
};

// A violated property: report and abort so libFuzzer saves the input.
[[noreturn]] inline void fail(const char *what) {
    std::fprintf(stderr, "fuzz property violated: %s\n", what);
    std::abort();
}
inline void require(bool ok, const char *what) {
    if (!ok) fail(what);
}

} // namespace fuzz
