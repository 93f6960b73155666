// SPDX-License-Identifier: Apache-2.0

// What the child side needs from the parent, carried as the opaque
// key/value strings rootlesskit passes from parent to child
// (NetworkDriverOpaque): the parent -> child half of the hand-over's wire
// format.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/addr.hpp"
#include "common/config.hpp"
#include "handover/messages.hpp"

namespace rknp {

using KeyValues = std::vector<std::pair<std::string, std::string>>;

// What the child side needs, carried as opaque key/value strings.
struct ChildSetup {
    std::string socket_path;
    std::string ifname;
    uint32_t mtu = kDefaultMtu;
    uint32_t ip = 0; // host byte order
    uint32_t prefix_len = 0;
    uint32_t gateway = 0;
    std::optional<Mac> mac;
    bool ipv6 = false;
    bool offload = true;
    std::optional<in6_addr> ipv6_address;
    // 1.7: the IPv6 address's prefix length and gateway (pasta's model;
    // libslirp's fd00::/64 and fd00::2 otherwise), and no IPv4 at all.
    uint32_t ipv6_prefix_len = kIpv6PrefixLen;
    std::optional<in6_addr> ipv6_gateway;
    bool ipv4 = true;
    uint32_t timeout_ms = kDefaultHandoverTimeoutMs;
    // Secrets only parent and child know: whoever else binds the socket
    // path or connects to it cannot prove itself (see handover/server.hpp).
    handover::Tokens tokens;

    static ChildSetup make(const ParentConfig &cfg, std::string socket_path,
                           const handover::Tokens &tokens);
    KeyValues encode() const;
    // Throws Error naming the missing or bad key; unknown keys are ignored
    // so that a newer parent can talk to an older child.
    static ChildSetup decode(const KeyValues &kv);
};

} // namespace rknp
