// SPDX-License-Identifier: Apache-2.0

// The child side: create the tap, configure it and lo with netlink (in a
// detached netns on a private thread if asked), hand the tap over.
#include "child/child.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <sys/ioctl.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "common/fd.hpp"
#include "handover/client.hpp"
#include "child/netlink.hpp"

namespace rknp {

namespace {

// Guest-bound frames queue here while the stack thread is busy; 1000 (the
// default) overflows with large TCP windows at MTU 1500.
constexpr uint32_t kTxQueueLen = 10000;
constexpr auto kSlaacWait = std::chrono::seconds(5);
// TUN_F_USO4/6 (linux/if_tun.h of Linux >= 6.2; Debian 12's headers lack them).
constexpr unsigned kTunUso4 = 0x20, kTunUso6 = 0x40;

UniqueFd open_tap(const std::string &ifname, bool offload, uint32_t mtu,
                  const Logger &log) {
    UniqueFd fd(::open("/dev/net/tun", O_RDWR | O_CLOEXEC));
    if (!fd) throw_errno("open /dev/net/tun");
    ifreq ifr{};
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI | (offload ? IFF_VNET_HDR : 0);
    std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
    if (::ioctl(fd.get(), TUNSETIFF, &ifr) < 0)
        throw_errno("create tap \"" + ifname + "\" (TUNSETIFF)");
    // Let the kernel hand over 64 KiB TCP super-frames with partial
    // checksums; the parent completes them (see offload.hpp). libslirp
    // drops IPv6 packets whose payload exceeds its MTU (ip6_input answers
    // ICMPv6 Too Big), so IPv6 super-frames only at the largest MTU, where
    // every one fits; below it the guest's kernel segments IPv6 TCP itself.
    unsigned flags = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO_ECN |
                     (mtu >= kMtuMax ? TUN_F_TSO6 : 0);
    if (!offload) return fd;
    // UDP GSO sends (UDP_SEGMENT, as QUIC stacks make them) come whole as
    // well where the kernel has it (Linux >= 6.2); the parent splits them
    // (datapath/udp/gso_splitter.hpp). An older kernel refuses the unknown bits.
    if (::ioctl(fd.get(), TUNSETOFFLOAD, flags | kTunUso4 | kTunUso6) == 0) {
        log.debug("tap offloads: TCP and UDP segmentation (USO)");
    } else if (::ioctl(fd.get(), TUNSETOFFLOAD, flags) == 0) {
        log.debug("tap offloads: TCP segmentation (no USO in this kernel)");
    } else {
        log.warn("tap offloads unavailable (TUNSETOFFLOAD): " +
                 std::string(std::strerror(errno)));
    }
    return fd;
}

// Best effort: SLAAC addresses are usable at once without DAD.
void disable_dad(const std::string &ifname, const Logger &log) {
    std::string path = "/proc/sys/net/ipv6/conf/" + ifname + "/accept_dad";
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd || ::write(fd.get(), "0", 1) != 1)
        log.debug("cannot write " + path + ": " + std::strerror(errno));
}

bool has_global_ipv6(const std::string &ifname) {
    ifaddrs *list = nullptr;
    if (::getifaddrs(&list) < 0) return false;
    bool found = false;
    for (ifaddrs *i = list; i != nullptr && !found; i = i->ifa_next) {
        if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET6 ||
            ifname != i->ifa_name)
            continue;
        auto *a = reinterpret_cast<sockaddr_in6 *>(i->ifa_addr);
        found = !IN6_IS_ADDR_LINKLOCAL(&a->sin6_addr);
    }
    ::freeifaddrs(list);
    return found;
}

std::string configure_here(const ChildSetup &s, const Logger &log,
                           bool link_only) {
    UniqueFd tap = open_tap(s.ifname, s.offload, s.mtu, log);
    Netlink nl;
    nl.link_up("lo");
    if (s.ipv6 && !s.ipv6_address) disable_dad(s.ifname, log);
    nl.link_up(s.ifname, s.mtu, kTxQueueLen, s.mac);
    if (link_only) {
        handover::send_tap(s.socket_path, tap.get(), s.ifname, s.tokens,
                           int(s.timeout_ms));
        log.info("tap " + s.ifname + " up, addresses left to the caller");
        return s.ifname;
    }
    int idx = nl.ifindex(s.ifname);
    if (s.ipv4) {
        uint32_t ip = htonl(s.ip), gw = htonl(s.gateway);
        nl.add_address(idx, AF_INET, &ip, s.prefix_len, false);
        nl.add_default_route(idx, AF_INET, &gw);
    }
    if (s.ipv6 && s.ipv6_address) {
        // pasta's model: the host's prefix length and gateway (which may be
        // link-local); else libslirp's fd00::/64 via fd00::2.
        in6_addr gw6{};
        if (s.ipv6_gateway)
            gw6 = *s.ipv6_gateway;
        else
            inet_pton(AF_INET6, kIpv6Gateway, &gw6);
        nl.add_address(idx, AF_INET6, s.ipv6_address->s6_addr, s.ipv6_prefix_len,
                       true);
        nl.add_default_route(idx, AF_INET6, &gw6);
    }
    handover::send_tap(s.socket_path, tap.get(), s.ifname, s.tokens,
                       int(s.timeout_ms));
    if (s.ipv6 && !s.ipv6_address) {
        // The router advertisement arrives once the parent reads the tap.
        auto deadline = std::chrono::steady_clock::now() + kSlaacWait;
        while (!has_global_ipv6(s.ifname)) {
            if (std::chrono::steady_clock::now() > deadline) {
                log.warn("no SLAAC address on " + s.ifname + " yet");
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    if (s.ipv4)
        log.info("configured " + s.ifname + " " + format_ipv4(s.ip) + "/" +
                 std::to_string(s.prefix_len) + " via " + format_ipv4(s.gateway));
    if (s.ipv6_gateway && s.ipv6_address)
        log.info("configured " + s.ifname + " " + format_ipv6(*s.ipv6_address) + "/" +
                 std::to_string(s.ipv6_prefix_len) + " via " +
                 format_ipv6(*s.ipv6_gateway));
    return s.ifname;
}

// Log records of the private thread, kept for the calling thread: the
// caller's callback must not run on a thread inside the detached netns. A
// runtime may start a thread of its own from inside a callback, cloned
// from the calling thread and so in its netns: Go does (a cgo callback
// can start an M that way), and rootlesskit then now and then ran the
// command of --detach-netns inside the detached netns.
class HeldLog {
public:
    Logger logger() { return Logger(&HeldLog::hold, this); }
    void replay(const Logger &to) const {
        for (const auto &[level, msg] : records_) to.log(level, msg);
    }

private:
    static void hold(void *self, int32_t level, const char *msg) noexcept {
        try {
            static_cast<HeldLog *>(self)->records_.emplace_back(level, msg);
        } catch (...) { // out of memory: the record is lost, not the set-up
        }
    }
    std::vector<std::pair<int32_t, std::string>> records_;
};

} // namespace

std::string configure_child(const ChildSetup &setup,
                            const std::string &detached_netns_path,
                            const Logger &log, bool link_only) {
    if (detached_netns_path.empty())
        return configure_here(setup, log, link_only);

    UniqueFd ns(::open(detached_netns_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns) throw_errno("open network namespace " + detached_netns_path);
    // setns affects only the calling thread, so a private thread keeps the
    // caller's namespace untouched; it exits when done, and its log records
    // reach the caller's callback from this thread then.
    std::string result;
    std::exception_ptr failure;
    HeldLog held;
    std::thread worker([&] {
        try {
            if (::setns(ns.get(), CLONE_NEWNET) < 0)
                throw_errno("enter network namespace " + detached_netns_path);
            result = configure_here(setup, held.logger(), link_only);
        } catch (...) {
            failure = std::current_exception();
        }
    });
    worker.join();
    held.replay(log);
    if (failure) std::rethrow_exception(failure);
    return result;
}

} // namespace rknp
