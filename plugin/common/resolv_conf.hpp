// SPDX-License-Identifier: Apache-2.0

// The host's DNS resolver as resolv.conf(5) names it: where DNS the guest
// sends to the forwarder address goes when the fast paths carry it (pasta's
// model, RKNP_NETWORK_MODEL_HOST). libslirp reads the same file for its own
// forwarder.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <optional>
#include <string_view>

namespace rknp {

// The first "nameserver" line with an IPv4 address (host byte order), in
// the text of a resolv.conf; comments (# and ;) and other lines skipped.
std::optional<uint32_t> first_nameserver4(std::string_view resolv_conf);

// The same, read from path (nullopt when it cannot be read).
std::optional<uint32_t> host_nameserver4(const char *path = "/etc/resolv.conf");

// Where DNS to an IPv6 forwarder address goes (pasta's IPv6 --dns-forward):
// the first "nameserver" line with a unicast IPv6 address, ::1 too (a
// link-local one names no interface here), else the first IPv4 one as
// ::ffff:a.b.c.d
// (an IPv6 socket reaches it), else nullopt.
std::optional<in6_addr> first_nameserver6(std::string_view resolv_conf);
std::optional<in6_addr> host_nameserver6(const char *path = "/etc/resolv.conf");

} // namespace rknp
