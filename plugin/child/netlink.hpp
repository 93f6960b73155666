// SPDX-License-Identifier: Apache-2.0

// Interface configuration over rtnetlink (libnl-route), in the network
// namespace of the calling thread.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/addr.hpp"

struct nl_sock;

namespace rknp {

class Netlink {
public:
    Netlink(); // throws Error
    ~Netlink();
    Netlink(const Netlink &) = delete;
    Netlink &operator=(const Netlink &) = delete;

    int ifindex(const std::string &ifname);
    // Sets the link up, with MTU, txqueuelen and MAC when given.
    void link_up(const std::string &ifname, std::optional<uint32_t> mtu = {},
                 std::optional<uint32_t> txqlen = {},
                 const std::optional<Mac> &mac = {});
    void add_address(int ifindex, int family, const void *addr,
                     uint32_t prefix_len, bool nodad);
    void add_default_route(int ifindex, int family, const void *gateway);

private:
    nl_sock *sock_ = nullptr;
};

} // namespace rknp
