// SPDX-License-Identifier: Apache-2.0

// The allocator setting rknp's own programs choose at start (the library
// cannot: it lives in someone else's process). libslirp gives every TCP
// connection two socket buffers of 128 KiB and soon grows both by a few
// bytes (realloc). While glibc maps such chunks, the growth is an mremap
// and an idle connection keeps about 9 KiB resident. But glibc raises its
// mmap threshold once a mapped chunk is freed (any closed connection):
// then the buffers come from the heap, the growth copies all 128 KiB of
// each, and every idle connection keeps 256 KiB resident (4000 idle flows:
// 1 GiB; docs/benchmarks.md), which the heap keeps after they close
// (docs/soak.md).
//
// Held at 64 KiB, not glibc's default of 128 KiB: libslirp's mbufs for
// 64 KiB frames (MTU 65520, just over 64 KiB each) are then mapped too.
// From the heap, those big chunks between small long-lived ones fragment
// the stack thread's arena: under the soak's traffic the libslirp TCP
// path's RSS grew 41 -> 50 MiB in 17 minutes at 128 KiB and stayed at
// 40 MiB at 64 KiB (60 minutes: +0.5 MiB/h).
#pragma once

#include <cstddef>

namespace cmd {

inline constexpr size_t kHeldMmapThreshold = 64 * 1024;

// Holds glibc's mmap threshold at kHeldMmapThreshold for the process's
// life, unless GLIBC_TUNABLES sets it (the user's choice stands). Chunks
// of that size and more are mapped, before and after the first free.
// Call before any thread starts.
void hold_mmap_threshold();

} // namespace cmd
