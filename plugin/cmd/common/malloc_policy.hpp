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
#pragma once

namespace cmd {

// Holds glibc's mmap threshold at its default (128 KiB) for the process's
// life, unless GLIBC_TUNABLES sets it (the user's choice stands). Chunks
// of the default threshold and more are mapped, as before the first free.
// Call before any thread starts.
void hold_mmap_threshold();

} // namespace cmd
