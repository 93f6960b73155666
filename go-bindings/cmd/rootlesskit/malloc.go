// SPDX-License-Identifier: Apache-2.0

package main

// #include <malloc.h>
// #include <stdlib.h>
// #include <string.h>
//
// // glibc's mmap threshold held at 64 KiB for the process's life, unless
// // GLIBC_TUNABLES sets it: see holdMmapThreshold.
// static void rknp_hold_mmap_threshold(void) {
//     const char *t = getenv("GLIBC_TUNABLES");
//     if (t != NULL && strstr(t, "mmap_threshold") != NULL) return;
//     (void)mallopt(M_MMAP_THRESHOLD, 64 * 1024);
// }
import "C"

// holdMmapThreshold is the allocator setting this program chooses for the
// plugin's libslirp (the library cannot: it lives in someone else's
// process; rknp-slirp4netns and rknp-pasta do the same,
// plugin/cmd/common/malloc_policy.hpp). libslirp gives every TCP
// connection two 128 KiB socket buffers and soon grows both a little
// (realloc). Mapped, the growth is an mremap and an idle connection keeps
// about 9 KiB resident; but glibc raises its threshold once a mapped chunk
// is freed (any closed connection), the buffers then come from the heap,
// the growth copies both, and each idle connection keeps 256 KiB (4000
// idle flows: 1 GiB, kept after they close; docs/benchmarks.md). Setting
// the threshold turns that raising off; 64 KiB, not glibc's 128, maps
// libslirp's mbufs for 64 KiB frames too, which on the heap fragment it
// (RSS 41 -> 50 MiB in 17 minutes of the soak; docs/soak.md). The value
// is malloc_policy.hpp's kHeldMmapThreshold. Go allocates nothing with
// malloc; only C code (the plugin, libslirp) sees this.
func holdMmapThreshold() {
	C.rknp_hold_mmap_threshold()
}
