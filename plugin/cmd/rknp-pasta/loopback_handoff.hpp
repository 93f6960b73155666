// SPDX-License-Identifier: Apache-2.0

// -t forwards' loopback clients spliced past the tap, as pasta splices
// them: every TCP forward to the namespace's own address asks the library
// for RKNP_FORWARD_HANDOFF_LOOPBACK (HandoffForwards, whoever adds it: the
// command line, "auto" or rknp-pesto), and each connection the library
// accepts from the host's 127.0.0.0/8 or ::1 arrives here, through one
// SOCK_SEQPACKET socket pair, instead of entering the stack.
// LoopbackHandoff receives them in the poll loop and has the relay carry
// each into the namespace from a socket opened there (LoopbackRelay::
// splice, fixed buffers): to the namespace's address at the forward's
// guest port, where the server sees the client come from that address (the
// kernel's source for a local destination), as pasta 2026's
// fwd_nat_from_host has it; with --host-lo-to-ns-lo to the namespace's
// 127.0.0.1 or ::1 (the client's family), where it sees 127.0.0.1 or ::1.
// Nothing listening there: the connect is refused and the client gets a
// reset, as pasta's splice gives it. Clients from elsewhere keep the
// stack's path and their address.
//
// Why the library hands the socket over rather than rknp-pasta listening
// on the host's loopback beside the library's wildcard listener: Linux
// refuses 127.0.0.1:P beside a listening 0.0.0.0:P unless both sockets
// set SO_REUSEPORT, which would let any process of the same uid bind the
// port too and take a share of its connections.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cmd/common/forward_backend.hpp"
#include "cmd/common/unique_fd.hpp"
#include "loopback_relay.hpp"

namespace pasta {

class LoopbackHandoff {
public:
    static constexpr int kBatch = 64; // connections taken per wake-up

    // ns_addr4: the namespace's IPv4 address (rknp_network.ip), where the
    // forwards go; to_ns_lo: --host-lo-to-ns-lo. Throws cmd::Failure if
    // the socket pair cannot be made.
    LoopbackHandoff(const std::string &ns_addr4, bool to_ns_lo);

    // The end the library gets as rknp_forward.handoff_fd (it keeps a
    // duplicate per forward; this one stays open for forwards added later).
    int library_end() const { return library_.get(); }
    const std::string &ns_addr() const { return ns_addr_; }

    // Appends the receiving end to poll; returns how many (1).
    std::size_t fill(std::vector<pollfd> &fds) const;
    // After poll: takes up to kBatch connections and hands each to relay.
    void dispatch(std::span<const pollfd> mine, LoopbackRelay &relay);

    // Where a client of family (its own, AF_INET or AF_INET6) goes in the
    // namespace for guest_port; returns the address's length.
    socklen_t target(int family, uint16_t guest_port, sockaddr_storage &ss) const;

private:
    std::string ns_addr_;
    in_addr ns4_{};
    bool to_ns_lo_;
    cmd::UniqueFd mine_, library_;
};

// The parent's forwards (inner), with RKNP_FORWARD_HANDOFF_LOOPBACK asked
// for every TCP forward to the namespace's own address (none given, or
// that one); those to an address routed behind it keep the stack's path.
// handoff may be null: forwards pass unchanged.
class HandoffForwards final : public cmd::ForwardBackend {
public:
    HandoffForwards(cmd::ForwardBackend &inner, const LoopbackHandoff *handoff)
        : inner_(inner), handoff_(handoff) {}
    bool add(const rknp_forward &f, uint32_t &id, std::string &error) override;
    bool remove(uint32_t id, std::string &error) override { return inner_.remove(id, error); }
    // Before any forward is added (handoff gone: null).
    void set_handoff(const LoopbackHandoff *handoff) { handoff_ = handoff; }

private:
    cmd::ForwardBackend &inner_;
    const LoopbackHandoff *handoff_;
};

} // namespace pasta
