// SPDX-License-Identifier: Apache-2.0

// Whether this process may open unprivileged ICMP ("ping") sockets, and
// the log line that says which path carries the guest's echo requests.
// The kernel lets a process open socket(AF_INET{,6}, SOCK_DGRAM,
// IPPROTO_ICMP{,V6}) only if its effective gid or one of its groups lies
// in net.ipv4.ping_group_range of its network namespace (both families;
// the default "1 0" admits nobody, not even root). The probe opens one
// socket of each family, the only test the kernel has the last word on,
// and reads the sysctl only to explain the answer. Run it before the
// stack thread is sandboxed (Landlock then hides /proc).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace rknp::icmp {

struct PingProbe {
    bool v4 = false, v6 = false;
    // Why IPv4 ping sockets are allowed or refused (the sysctl, the gid).
    std::string why;
    // Why IPv6 ones are refused when IPv4 ones are not (IPv6 disabled).
    std::string why6;
};

// Asks the kernel (opens and closes a socket of each family).
PingProbe probe_ping_sockets();

// "ICMP echo: ping sockets (net.ipv4.ping_group_range 0 2147483647 allows
// gid 1000)" or "ICMP echo: libslirp (ping sockets refused: ...)".
std::string describe(const PingProbe &p);

// Parsing and matching ping_group_range as the kernel does.
struct GidRange {
    uint32_t low = 1, high = 0;
};
std::optional<GidRange> parse_ping_group_range(std::string_view text);
// The first of egid and groups inside r, if any.
std::optional<uint32_t> allowing_gid(const GidRange &r, uint32_t egid,
                                     std::span<const uint32_t> groups);

} // namespace rknp::icmp
