// SPDX-License-Identifier: Apache-2.0
#pragma once

// The no-allocation tests' instrument (test_tcp_noalloc.cpp,
// test_udp_noalloc.cpp): operator new replaced by one that counts while
// `counted` runs a call. Replacing operator new is program-wide: include
// this from one file of a test executable of its own (with main.cpp), not
// from the shared unit-test binary.
#include <cstddef>
#include <cstdlib>
#include <new>

// GCC sees malloc behind a replaced operator new and warns about free().
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace alloc_count {
// Test-only instrumentation: the count is read and reset around each call.
inline bool counting = false;
inline std::size_t allocs = 0;

// counted(f): the allocations f() makes.
template <class F> std::size_t counted(F &&f) {
    allocs = 0;
    counting = true;
    f();
    counting = false;
    return allocs;
}
} // namespace alloc_count

void *operator new(std::size_t n) {
    if (alloc_count::counting) ++alloc_count::allocs;
    if (void *p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
