// SPDX-License-Identifier: Apache-2.0

// Moves the fuzz process into a private, empty network namespace before any
// input runs: libslirp turns fuzzed guest frames into real socket calls
// (connect, sendto, DNS forwarding), and those must never leave the
// process's own namespace. Aborts if isolation cannot be established.
#pragma once

#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace fuzz {

inline void isolate_network() {
    // Root: a new netns; otherwise a user namespace makes us root in it.
    if (::unshare(CLONE_NEWNET) < 0 &&
        ::unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0) {
        std::fprintf(stderr, "fuzz: cannot enter a private network namespace "
                             "(%s); refusing to feed frames to libslirp\n",
                     std::strerror(errno));
#ifdef RKNP_FUZZ_REPLAY
        // The corpus replay under ctest: a build without namespaces (a
        // package build in a chroot without user namespaces) skips it.
        std::exit(77);
#else
        std::abort();
#endif
    }
    // Only a loopback device may exist here.
    struct if_nameindex *list = ::if_nameindex();
    if (list == nullptr) std::abort();
    for (struct if_nameindex *i = list; i->if_index != 0; ++i)
        if (std::strcmp(i->if_name, "lo") != 0) {
            std::fprintf(stderr, "fuzz: unexpected interface %s\n", i->if_name);
            std::abort();
        }
    ::if_freenameindex(list);
    // lo up lets the host-loopback path (10.0.2.2 -> 127.0.0.1) run: its
    // connects are refused at once, inside this namespace.
    int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq ifr{};
    std::strcpy(ifr.ifr_name, "lo");
    if (s >= 0 && ::ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
        ifr.ifr_flags |= IFF_UP;
        (void)::ioctl(s, SIOCSIFFLAGS, &ifr);
    }
    if (s >= 0) ::close(s);
    // Ping sockets for everyone, in this namespace only (the ICMP echo
    // path; where the write fails, its probe finds them refused).
    if (FILE *f = std::fopen("/proc/sys/net/ipv4/ping_group_range", "w")) {
        std::fputs("0 2147483647\n", f);
        std::fclose(f);
    }
}

} // namespace fuzz
