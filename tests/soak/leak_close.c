// SPDX-License-Identifier: Apache-2.0

// A deliberately broken stack for tests/soak/run.sh (SOAK_LEAK), never
// shipped: preloaded into the stack's process, it interposes close(2) for
// librknp and libslirp (Go's own closes are system calls, not libc's):
//   SOAK_LEAK_FD_EVERY=N   every Nth TCP socket closed stays open (a flow
//                          leaked: its fd and its socket)
//   SOAK_LEAK_MEM_KIB=K    K KiB of heap written and never freed per TCP
//                          socket closed (RSS that grows with the traffic)
// The constructor removes LD_PRELOAD from the environment, so rootlesskit's
// child and the guest's processes run without it. The soak must fail
// with either.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int (*real_close)(int);
static unsigned long fd_every;
static size_t mem_bytes;
static atomic_ulong closes;

__attribute__((constructor)) static void leak_init(void) {
    const char *v = getenv("SOAK_LEAK_FD_EVERY");
    fd_every = v ? strtoul(v, NULL, 10) : 0;
    v = getenv("SOAK_LEAK_MEM_KIB");
    mem_bytes = v ? strtoul(v, NULL, 10) * 1024 : 0;
    unsetenv("LD_PRELOAD");
    real_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
}

static int is_tcp(int fd) {
    int v;
    socklen_t len = sizeof v;
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) != 0 ||
        (v != AF_INET && v != AF_INET6))
        return 0;
    len = sizeof v;
    return getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) == 0 && v == SOCK_STREAM;
}

int close(int fd) {
    if ((fd_every || mem_bytes) && is_tcp(fd)) {
        if (mem_bytes) {
            char *p = malloc(mem_bytes);
            if (p) memset(p, 0x5a, mem_bytes);
        }
        if (fd_every && atomic_fetch_add(&closes, 1) % fd_every == fd_every - 1)
            return 0; // left open: the leak
    }
    return real_close(fd);
}
