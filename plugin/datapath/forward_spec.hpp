// SPDX-License-Identifier: Apache-2.0

// A port forward as the paths and libslirp take it: a validated spec (its
// host side, the guest's address and port, or an address routed behind
// the guest). It sits beside the paths,
// below the parent's table of forwards (parent/forward_table.hpp), so that
// the paths and the libslirp adapter need nothing from above.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "common/addr.hpp"
#include "common/fd.hpp"
#include "rknp.h"

namespace rknp {

// The guest's IPv6 network as a forward's IPv6 guest_addr is checked
// against: libslirp's fd00::/64 or pasta's model's (ipv6_network).
struct GuestNet6 {
    Ipv6Prefix prefix;
    in6_addr gateway{};
    std::optional<in6_addr> dns; // a DNS forwarder, where there is one
};

struct ForwardSpec {
    bool udp = false;
    bool host_v6 = false;
    in6_addr host6{};      // when host_v6
    uint32_t host4 = 0;    // host byte order, when !host_v6
    uint16_t host_port = 0;
    uint32_t guest = 0;    // host byte order, when !guest_v6
    bool guest_v6 = false; // an IPv6 guest end (1.7)
    in6_addr guest6{};     // when guest_v6
    uint16_t guest_port = 0;
    // guest lies outside the guest's network: an address routed behind
    // it (a container on a bridge network in the namespace). Frames go to
    // the guest's MAC; the replies, from that address, are let in for the
    // forward's flows only (Path::routed_frame).
    bool routed = false;
    // RKNP_FORWARD_HANDOFF_LOOPBACK (TCP): the library's duplicate of the
    // caller's handoff_fd, shared by the copies of this spec (the parent's
    // table, the path's listener), closed with the last. Null: none.
    std::shared_ptr<const UniqueFd> handoff;

    // Validates f against the guest networks (net6: the guest's IPv6
    // network, nullptr without IPv6); throws Error naming the field.
    static ForwardSpec from_c(const rknp_forward &f, const Ipv4Cidr &net,
                              const GuestNet6 *net6 = nullptr);
    std::string host_string() const;
    // The guest end: "10.0.2.100" or "fd00::100".
    std::string guest_string() const;
    // The guest end as the paths key flows: IPv4-mapped or IPv6.
    void guest_bytes(uint8_t out[16]) const;
    // "tcp 127.0.0.1:8080": the host side, for messages.
    std::string host_side() const;
    bool same_host_side(const ForwardSpec &o) const;
    // The host side as a socket address; returns its length.
    socklen_t host_sockaddr(sockaddr_storage &out) const;
    struct HostAddress {
        sockaddr_storage ss{};
        socklen_t len = 0;
        const sockaddr *get() const { return reinterpret_cast<const sockaddr *>(&ss); }
    };
    HostAddress host_address() const {
        HostAddress h;
        h.len = host_sockaddr(h.ss);
        return h;
    }
    // A path's set-up of this forward returned err (0 or an errno): throws
    // Error naming the forward unless 0.
    void check_added(int err) const;
};

// The Path interface's forwards for a path whose own take the host side as
// a socket address (the TCP and UDP fast paths): path.add_forward(host,
// host_len, guest[16], guest_v6, guest_port, extra...) returns 0 or an errno
// (extra: what a path takes beyond the addresses, such as the TCP fast
// path's handoff socket), path.remove_forward(host, host_len) whether it
// had one.
template <class P, class... Extra>
void add_socket_forward(P &path, const ForwardSpec &f, Extra &&...extra) {
    const ForwardSpec::HostAddress h = f.host_address();
    uint8_t guest[16];
    f.guest_bytes(guest);
    f.check_added(path.add_forward(h.get(), h.len, guest, f.guest_v6, f.guest_port,
                                   std::forward<Extra>(extra)...));
}
template <class P> void remove_socket_forward(P &path, const ForwardSpec &f) {
    const ForwardSpec::HostAddress h = f.host_address();
    (void)path.remove_forward(h.get(), h.len);
}

} // namespace rknp
