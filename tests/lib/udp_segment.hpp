// SPDX-License-Identifier: Apache-2.0
#pragma once

// send_segmented: one sendmsg of a run of UDP datagrams (UDP_SEGMENT), as
// a host application sends to the UDP fast path; the unit tests and the
// UDP fuzz target share it.
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <cstring>
#include <span>

// data to `to` from fd in one send, in datagrams of seg bytes (UDP_SEGMENT
// when seg < data.size(): a UDP_GRO socket reads them coalesced); the
// sendmsg result (the bytes sent, or -1).
inline ssize_t send_segmented(int fd, const sockaddr_storage &to,
                              std::span<const uint8_t> data, size_t seg, int flags = 0) {
    iovec iov{const_cast<uint8_t *>(data.data()), data.size()};
    msghdr m{};
    m.msg_name = const_cast<sockaddr_storage *>(&to);
    m.msg_namelen = to.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    alignas(cmsghdr) uint8_t ctl[CMSG_SPACE(sizeof(uint16_t))]{};
    if (seg < data.size()) {
        m.msg_control = ctl;
        m.msg_controllen = sizeof ctl;
        cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_UDP;
        c->cmsg_type = UDP_SEGMENT;
        c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        const uint16_t s = uint16_t(seg);
        std::memcpy(CMSG_DATA(c), &s, sizeof s);
    }
    return ::sendmsg(fd, &m, flags);
}
