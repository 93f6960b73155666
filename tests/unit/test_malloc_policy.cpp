// SPDX-License-Identifier: Apache-2.0

// The commands' allocator setting (plugin/cmd/common/malloc_policy.hpp):
// once a mapped chunk is freed, glibc serves libslirp's 128 KiB socket
// buffers from the heap, unless the threshold is held. Each case runs in
// a forked child: the setting is the whole process's.
#include <doctest/doctest.h>

#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "cmd/common/malloc_policy.hpp"

namespace {

constexpr size_t kSlirpBuffer = 128 * 1024; // libslirp's TCP_SNDSPACE

// In a child: a connection's buffers come and go (glibc raises its
// threshold past them), then 16 new connections' buffers are allocated.
// Exits with how many of those 32 are mapped chunks.
int mapped_after_a_closed_connection(bool hold) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        if (hold) cmd::hold_mmap_threshold();
        void *closed = std::malloc(kSlirpBuffer + 4096);
        asm volatile("" : : "r"(closed) : "memory"); // not elided with the free
        std::free(closed);
        const size_t before = mallinfo2().hblks;
        std::vector<void *> bufs;
        for (int i = 0; i < 32; ++i) bufs.push_back(std::malloc(kSlirpBuffer));
        const size_t mapped = mallinfo2().hblks - before;
        for (void *b : bufs) std::free(b);
        ::_exit(int(mapped));
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    return WEXITSTATUS(status);
}

} // namespace

TEST_CASE("malloc policy: libslirp's buffers stay mapped after a connection closed") {
    // As shipped, glibc moves them to the heap (where growing them copies
    // all of each: 256 KiB resident an idle connection).
    CHECK(mapped_after_a_closed_connection(false) == 0);
    CHECK(mapped_after_a_closed_connection(true) == 32);
}

TEST_CASE("malloc policy: GLIBC_TUNABLES naming the threshold is left alone") {
    REQUIRE(::setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=4194304", 1) == 0);
    // Set after start, the variable does not reach glibc: the hold is
    // skipped, so glibc's dynamic threshold acts as shipped.
    CHECK(mapped_after_a_closed_connection(true) == 0);
    REQUIRE(::unsetenv("GLIBC_TUNABLES") == 0);
}
