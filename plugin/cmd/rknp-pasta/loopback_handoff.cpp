// SPDX-License-Identifier: Apache-2.0

// -t forwards' loopback clients spliced past the tap (see
// loopback_handoff.hpp).
#include "loopback_handoff.hpp"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cmd/common/errors.hpp"
#include "common/fd_passing.hpp"
#include "forward_table.hpp"

namespace pasta {

LoopbackHandoff::LoopbackHandoff(const std::string &ns_addr4, bool to_ns_lo)
    : ns_addr_(ForwardTable::canonical(ns_addr4)), to_ns_lo_(to_ns_lo) {
    if (::inet_pton(AF_INET, ns_addr4.c_str(), &ns4_) != 1)
        throw cmd::Failure("the namespace's address '" + ns_addr4 + "' is not IPv4");
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        throw cmd::sys_failure("socketpair");
    mine_.reset(sv[0]);
    library_.reset(sv[1]);
}

std::size_t LoopbackHandoff::fill(std::vector<pollfd> &fds) const {
    fds.push_back({mine_.get(), POLLIN, 0});
    return 1;
}

socklen_t LoopbackHandoff::target(int family, uint16_t guest_port,
                                  sockaddr_storage &ss) const {
    if (to_ns_lo_) return loopback_sockaddr(family, guest_port, ss);
    // The forward's own destination for every client, ::1's too: the
    // server a loopback client reaches is the one every other client of
    // the forward reaches (pasta would take ::1 to the namespace's IPv6
    // address; rknp's forwards go to its IPv4 one).
    std::memset(&ss, 0, sizeof ss);
    auto *a = reinterpret_cast<sockaddr_in *>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(guest_port);
    a->sin_addr = ns4_;
    return sizeof *a;
}

void LoopbackHandoff::dispatch(std::span<const pollfd> mine, LoopbackRelay &relay) {
    if (mine.empty() || !mine[0].revents) return;
    for (int i = 0; i < kBatch; i++) {
        rknp_handoff m{};
        cmd::UniqueFd client;
        int flags = 0;
        ssize_t n = rknp::recv_with_fd(mine_.get(), &m, sizeof m, client, flags, MSG_DONTWAIT);
        if (n < 0) return; // EAGAIN (or nothing more to take)
        if (!client) continue; // truncated (out of fds): the kernel closed it
        // A later library may send a longer rknp_handoff: its first fields
        // are these.
        sockaddr_storage local{};
        socklen_t len = sizeof local;
        if (std::size_t(n) < offsetof(rknp_handoff, guest_port) + sizeof m.guest_port ||
            m.guest_port == 0 || m.guest_port > 65535 ||
            ::getsockname(client.get(), reinterpret_cast<sockaddr *>(&local), &len) < 0) {
            linger l{1, 0};
            ::setsockopt(client.get(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
            continue;
        }
        sockaddr_storage to;
        socklen_t to_len = target(local.ss_family, uint16_t(m.guest_port), to);
        relay.splice(std::move(client), to, to_len);
    }
}

bool HandoffForwards::add(const rknp_forward &f, uint32_t &id, std::string &error) {
    if (!handoff_ || f.protocol != RKNP_PROTO_TCP ||
        (f.guest_addr && ForwardTable::canonical(f.guest_addr) != handoff_->ns_addr()))
        return inner_.add(f, id, error);
    rknp_forward spliced = f;
    spliced.flags |= RKNP_FORWARD_HANDOFF_LOOPBACK;
    spliced.handoff_fd = handoff_->library_end();
    return inner_.add(spliced, id, error);
}

} // namespace pasta
