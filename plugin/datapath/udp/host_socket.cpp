// SPDX-License-Identifier: Apache-2.0

// A guest flow's host socket on the UDP fast path (host_socket.hpp).
#include "datapath/udp/host_socket.hpp"

#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#include <cerrno>

#include "datapath/udp/fastpath_config.hpp"

namespace rknp::udp {

namespace {

bool shortage_errno(int err) {
    return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM || err == EAGAIN;
}

HostSocket connect_host_socket(bool v6, const HostAddrs &addrs) {
    HostSocket h;
    UniqueFd s(::socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    const int one = 1;
    // IP_RECVERR: ICMP errors queue with their type and the datagram they
    // answer, which is what the guest must be told.
    if (!s.valid() ||
        (v6 ? ::setsockopt(s.get(), SOL_IPV6, IPV6_RECVERR, &one, sizeof one)
            : ::setsockopt(s.get(), SOL_IP, IP_RECVERR, &one, sizeof one)) != 0) {
        h.err = errno;
        // No IPv6 in this kernel (EAFNOSUPPORT) is the destination's
        // business: no route to it.
        h.shortage = h.err != EAFNOSUPPORT;
        return h;
    }
    if (addrs.bind_len != 0 &&
        ::bind(s.get(), reinterpret_cast<const sockaddr *>(&addrs.bind), addrs.bind_len) != 0) {
        h.err = errno; // EADDRNOTAVAIL: the outbound address is not the host's
        h.shortage = shortage_errno(h.err);
        return h;
    }
    if (::connect(s.get(), reinterpret_cast<const sockaddr *>(&addrs.target),
                  addrs.target_len) != 0) {
        h.err = errno;
        // EADDRNOTAVAIL here: no ephemeral port left.
        h.shortage = shortage_errno(h.err) || h.err == EADDRNOTAVAIL;
        return h;
    }
    h.fd = std::move(s);
    return h;
}

} // namespace

HostSocket open_host_socket(bool v6, const HostAddrs &addrs, bool gro) {
    HostSocket hs = connect_host_socket(v6, addrs);
    if (hs.fd.valid() &&
        connected_to_itself(hs.fd.get(), reinterpret_cast<const sockaddr *>(&addrs.target))) {
        // While this one holds the port, a second socket gets another,
        // and the guest hears what nothing listening there means.
        HostSocket self = std::move(hs);
        hs = connect_host_socket(v6, addrs);
    }
    if (!hs.fd.valid()) return hs;
    const int one = 1;
    // Without UDP_GRO reads simply come one datagram each.
    if (gro) (void)::setsockopt(hs.fd.get(), SOL_UDP, UDP_GRO, &one, sizeof one);
    (void)::setsockopt(hs.fd.get(), SOL_SOCKET, SO_RCVBUF, &kHostRcvBuf, sizeof kHostRcvBuf);
    return hs;
}

} // namespace rknp::udp
