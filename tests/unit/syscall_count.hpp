// SPDX-License-Identifier: Apache-2.0
#pragma once

// The system-call test's instrument (test_tcp_syscalls.cpp): the libc
// functions the fast paths call on sockets, replaced by ones that count
// per name while `counted` runs a call, then call libc's own. Replacing
// them is program-wide (the executable's definitions win over libc's for
// the static rknp_core too): include this from one file of a test
// executable of its own, as alloc_count.hpp. Counts calls, not time:
// deterministic on any machine.
#include <dlfcn.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdarg>
#include <map>
#include <string>

namespace syscall_count {
// Test-only instrumentation: read and reset around each counted call.
inline bool counting = false;
inline std::map<std::string, size_t> calls;

inline void note(const char *name) {
    if (!counting) return;
    counting = false; // the map's own allocation calls nothing counted
    ++calls[name];
    counting = true;
}

// counted(f): f() runs with the counts on (they accumulate in calls).
template <class F> void counted(F &&f) {
    counting = true;
    f();
    counting = false;
}

template <class Fn> Fn real(const char *name) {
    return reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, name));
}
} // namespace syscall_count

// Each forwards to the next definition (libc's) after counting.
#define SYSCALL_COUNT_FORWARD(ret, name, params, args)                                  \
    extern "C" ret name params {                                                        \
        syscall_count::note(#name);                                                     \
        static auto fn = syscall_count::real<ret(*) params>(#name);                     \
        return fn args;                                                                 \
    }

SYSCALL_COUNT_FORWARD(int, socket, (int d, int t, int p), (d, t, p))
SYSCALL_COUNT_FORWARD(int, setsockopt, (int fd, int l, int o, const void *v, socklen_t n),
                      (fd, l, o, v, n))
SYSCALL_COUNT_FORWARD(int, getsockopt, (int fd, int l, int o, void *v, socklen_t *n),
                      (fd, l, o, v, n))
SYSCALL_COUNT_FORWARD(int, connect, (int fd, const sockaddr *a, socklen_t n), (fd, a, n))
SYSCALL_COUNT_FORWARD(int, bind, (int fd, const sockaddr *a, socklen_t n), (fd, a, n))
SYSCALL_COUNT_FORWARD(int, getsockname, (int fd, sockaddr *a, socklen_t *n), (fd, a, n))
SYSCALL_COUNT_FORWARD(int, accept4, (int fd, sockaddr *a, socklen_t *n, int f), (fd, a, n, f))
SYSCALL_COUNT_FORWARD(int, epoll_ctl, (int e, int op, int fd, epoll_event *ev),
                      (e, op, fd, ev))
SYSCALL_COUNT_FORWARD(int, epoll_wait, (int e, epoll_event *ev, int n, int t), (e, ev, n, t))
SYSCALL_COUNT_FORWARD(ssize_t, recv, (int fd, void *b, size_t n, int f), (fd, b, n, f))
SYSCALL_COUNT_FORWARD(ssize_t, recvmsg, (int fd, msghdr *m, int f), (fd, m, f))
SYSCALL_COUNT_FORWARD(ssize_t, send, (int fd, const void *b, size_t n, int f), (fd, b, n, f))
SYSCALL_COUNT_FORWARD(ssize_t, sendmsg, (int fd, const msghdr *m, int f), (fd, m, f))
SYSCALL_COUNT_FORWARD(int, shutdown, (int fd, int how), (fd, how))
SYSCALL_COUNT_FORWARD(int, close, (int fd), (fd))
SYSCALL_COUNT_FORWARD(int, poll, (pollfd * p, nfds_t n, int t), (p, n, t))
SYSCALL_COUNT_FORWARD(ssize_t, read, (int fd, void *b, size_t n), (fd, b, n))
SYSCALL_COUNT_FORWARD(ssize_t, write, (int fd, const void *b, size_t n), (fd, b, n))
SYSCALL_COUNT_FORWARD(ssize_t, writev, (int fd, const iovec *v, int n), (fd, v, n))

#undef SYSCALL_COUNT_FORWARD

// ioctl is variadic: every request the fast paths make takes one pointer.
extern "C" int ioctl(int fd, unsigned long req, ...) {
    syscall_count::note("ioctl");
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    static auto fn = syscall_count::real<int (*)(int, unsigned long, ...)>("ioctl");
    return fn(fd, req, arg);
}
