// SPDX-License-Identifier: Apache-2.0

// Port forwards: validated specs and the table of active ones. The table
// is touched only under Parent's forward mutex; libslirp calls happen on
// the stack thread (StackLoop::add_forward / remove_forward).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <map>
#include <string>

#include "common/addr.hpp"
#include "rknp.h"

namespace rknp {

struct ForwardSpec {
    bool udp = false;
    bool host_v6 = false;
    in6_addr host6{};      // when host_v6
    uint32_t host4 = 0;    // host byte order, when !host_v6
    uint16_t host_port = 0;
    uint32_t guest = 0;    // host byte order
    uint16_t guest_port = 0;

    // Validates f against the guest network; throws Error naming the field.
    static ForwardSpec from_c(const rknp_forward &f, const Ipv4Cidr &net);
    std::string host_string() const;
    // "tcp 127.0.0.1:8080": the host side, for messages.
    std::string host_side() const;
    bool same_host_side(const ForwardSpec &o) const;
    // The host side as a socket address; returns its length.
    socklen_t host_sockaddr(sockaddr_storage &out) const;
};

class ForwardTable {
public:
    // Throws Error(RKNP_ERR_INVALID_ARGUMENT) for a duplicate host side.
    void check_new(const ForwardSpec &s) const;
    uint32_t insert(const ForwardSpec &s);
    // Throws Error(RKNP_ERR_INVALID_ARGUMENT) for an unknown id.
    const ForwardSpec &at(uint32_t id) const;
    void erase(uint32_t id);
    void clear() { fwds_.clear(); }
    const std::map<uint32_t, ForwardSpec> &all() const { return fwds_; }

private:
    std::map<uint32_t, ForwardSpec> fwds_;
    uint32_t next_id_ = 1;
};

} // namespace rknp
