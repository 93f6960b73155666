// SPDX-License-Identifier: Apache-2.0

// The ping-socket probe: one socket per family, and the sysctl and gids
// that explain the kernel's answer.
#include "datapath/icmp/probe.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

namespace rknp::icmp {

namespace {

constexpr const char *kSysctl = "/proc/sys/net/ipv4/ping_group_range";

// 0 or the errno of socket(family, SOCK_DGRAM, proto).
int try_socket(int family, int proto) {
    int fd = ::socket(family, SOCK_DGRAM | SOCK_CLOEXEC, proto);
    if (fd < 0) return errno;
    ::close(fd);
    return 0;
}

std::string range_text(const std::optional<GidRange> &r) {
    if (!r) return "net.ipv4.ping_group_range unreadable";
    return "net.ipv4.ping_group_range " + std::to_string(r->low) + " " +
           std::to_string(r->high);
}

std::optional<GidRange> read_range() {
    std::ifstream in(kSysctl);
    if (!in) return std::nullopt;
    std::string text((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
    return parse_ping_group_range(text);
}

std::vector<uint32_t> my_groups() {
    int n = ::getgroups(0, nullptr);
    if (n <= 0) return {};
    std::vector<gid_t> g(static_cast<size_t>(n));
    n = ::getgroups(n, g.data());
    if (n <= 0) return {};
    return std::vector<uint32_t>(g.begin(), g.begin() + n);
}

} // namespace

std::optional<GidRange> parse_ping_group_range(std::string_view text) {
    uint32_t v[2];
    const char *p = text.data(), *end = text.data() + text.size();
    for (uint32_t &x : v) {
        while (p < end && (*p == ' ' || *p == '\t')) ++p;
        auto [q, ec] = std::from_chars(p, end, x);
        if (ec != std::errc() || q == p) return std::nullopt;
        p = q;
    }
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n')) ++p;
    if (p != end) return std::nullopt;
    return GidRange{v[0], v[1]};
}

std::optional<uint32_t> allowing_gid(const GidRange &r, uint32_t egid,
                                     std::span<const uint32_t> groups) {
    auto in = [&](uint32_t g) { return r.low <= g && g <= r.high; };
    if (in(egid)) return egid;
    for (uint32_t g : groups)
        if (in(g)) return g;
    return std::nullopt;
}

PingProbe probe_ping_sockets() {
    PingProbe p;
    const int e4 = try_socket(AF_INET, IPPROTO_ICMP);
    const int e6 = try_socket(AF_INET6, IPPROTO_ICMPV6);
    p.v4 = e4 == 0;
    p.v6 = e6 == 0 && p.v4; // one sysctl rules both: IPv6 alone is odd
    const auto range = read_range();
    const uint32_t egid = uint32_t(::getegid());
    const auto groups = my_groups();
    const auto gid = range ? allowing_gid(*range, egid, groups) : std::nullopt;
    if (p.v4) {
        p.why = range_text(range);
        p.why += gid ? " allows gid " + std::to_string(*gid) : " allows us";
        if (!p.v6)
            p.why6 = std::string("socket(AF_INET6, SOCK_DGRAM, IPPROTO_ICMPV6): ") +
                     std::strerror(e6 == 0 ? EPERM : e6);
    } else {
        p.why = std::string("socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP): ") +
                std::strerror(e4) + "; " + range_text(range);
        if (range && !gid)
            p.why += " excludes gid " + std::to_string(egid) + " and its groups";
    }
    return p;
}

std::string describe(const PingProbe &p) {
    if (!p.v4) return "ICMP echo: libslirp (ping sockets refused: " + p.why + ")";
    if (!p.v6)
        return "ICMP echo: ping sockets for IPv4 (" + p.why +
               "), libslirp for IPv6 (" + p.why6 + ")";
    return "ICMP echo: ping sockets (" + p.why + ")";
}

} // namespace rknp::icmp
