// SPDX-License-Identifier: Apache-2.0

// A network namespace of the test's own for unit cases that need real
// sockets under settings the host must keep (ping_group_range, the
// ephemeral port range): a thread unshares one, sets lo up with 192.0.2.1
// and 2001:db8::1 on it, writes the case's sysctls and runs the body
// there. Nothing of the host's network is touched and no packet leaves
// that namespace. Without root (no namespace) the case is skipped with a
// message.
#pragma once

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace rknp::testns {

// A sysctl of the namespace (a path under /proc/sys/net) and its value.
using Sysctl = std::pair<std::string, std::string>;

namespace detail {

struct In6Ifreq { // struct in6_ifreq (linux/ipv6.h clashes with netinet/in.h)
    in6_addr addr;
    uint32_t prefixlen;
    int ifindex;
};

// Sets up the calling thread's new network namespace; "" or why not.
inline std::string enter(const std::vector<Sysctl> &sysctls, bool &v6) {
    if (::unshare(CLONE_NEWNET) != 0)
        return std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
    int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq ifr{};
    std::strcpy(ifr.ifr_name, "lo");
    if (::ioctl(s, SIOCGIFFLAGS, &ifr) != 0) return "SIOCGIFFLAGS lo";
    ifr.ifr_flags |= IFF_UP;
    if (::ioctl(s, SIOCSIFFLAGS, &ifr) != 0) return "SIOCSIFFLAGS lo";
    ifreq alias{};
    std::strcpy(alias.ifr_name, "lo:1");
    auto *sin = reinterpret_cast<sockaddr_in *>(&alias.ifr_addr);
    sin->sin_family = AF_INET;
    inet_pton(AF_INET, "192.0.2.1", &sin->sin_addr);
    if (::ioctl(s, SIOCSIFADDR, &alias) != 0) return "SIOCSIFADDR 192.0.2.1";
    ::close(s);
    for (const Sysctl &c : sysctls) {
        std::ofstream f(c.first);
        f << c.second << "\n";
        if (!f.flush()) return "writing this namespace's " + c.first;
    }
    v6 = false;
    int s6 = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s6 >= 0) {
        In6Ifreq r6{};
        inet_pton(AF_INET6, "2001:db8::1", &r6.addr);
        r6.prefixlen = 128;
        r6.ifindex = int(if_nametoindex("lo"));
        v6 = ::ioctl(s6, SIOCSIFADDR, &r6) == 0;
        ::close(s6);
    }
    // A new IPv6 address stays tentative until the kernel's DAD worker has
    // run (at once on lo, but asynchronously): until then it neither
    // sends nor receives. Binding to it succeeds once it is usable.
    for (const char *a : {"::1", "2001:db8::1"}) {
        for (int i = 0; v6 && i < 500; ++i) {
            sockaddr_in6 b{};
            b.sin6_family = AF_INET6;
            inet_pton(AF_INET6, a, &b.sin6_addr);
            int t = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
            bool ok = t >= 0 && ::bind(t, reinterpret_cast<sockaddr *>(&b), sizeof b) == 0;
            if (t >= 0) ::close(t);
            if (ok) break;
            if (i == 499) v6 = false;
            ::usleep(10000);
        }
    }
    return "";
}

} // namespace detail

// Runs body(v6 usable) on a thread inside a fresh network namespace with
// these sysctls written; false (with a message) if there is none to be had.
inline bool in_own_netns(const std::vector<Sysctl> &sysctls,
                         const std::function<void(bool v6)> &body) {
    std::string why;
    std::exception_ptr error;
    std::thread t([&] {
        bool v6 = false;
        why = detail::enter(sysctls, v6);
        if (!why.empty()) return;
        try {
            body(v6);
        } catch (...) {
            error = std::current_exception();
        }
    });
    t.join();
    if (error) std::rethrow_exception(error);
    if (!why.empty()) {
        MESSAGE("skipped: no network namespace of our own (" << why
                << "); these cases need root");
        return false;
    }
    return true;
}

} // namespace rknp::testns
