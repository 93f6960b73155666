// SPDX-License-Identifier: Apache-2.0

// The host's DNS resolver as resolv.conf(5) names it: where DNS the guest
// sends to the forwarder address goes when the fast paths carry it (pasta's
// model, RKNP_NETWORK_MODEL_HOST). libslirp reads the same file for its own
// forwarder.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace rknp {

// The first "nameserver" line with an IPv4 address (host byte order), in
// the text of a resolv.conf; comments (# and ;) and other lines skipped.
std::optional<uint32_t> first_nameserver4(std::string_view resolv_conf);

// The same, read from path (nullopt when it cannot be read).
std::optional<uint32_t> host_nameserver4(const char *path = "/etc/resolv.conf");

} // namespace rknp
