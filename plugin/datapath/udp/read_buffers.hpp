// SPDX-License-Identifier: Apache-2.0

// The UDP fast path's buffers for reading host sockets: one recvmmsg
// batch, kBatch datagrams of up to kBuf bytes with their control messages.
// One set serves the guest's flows (udp::FastPath) and the forwarded
// ports (udp::Forwards): the stack thread reads one socket at a time and
// hands a batch's datagrams to the guest before the next read, so a
// second megabyte would buy nothing. Allocated once; stack thread only.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace rknp::udp {

struct ReadBuffers {
    static constexpr size_t kBatch = 16;
    static constexpr size_t kBuf = 65536;
    // A datagram's ancillary data: UDP_GRO's segment size and, on a
    // wildcard forward, the packet's local address.
    static constexpr size_t kCtl = CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(in6_pktinfo));

    std::vector<uint8_t> data = std::vector<uint8_t>(kBatch * kBuf);
    std::array<mmsghdr, kBatch> msgs{};
    std::array<iovec, kBatch> iov{};
    std::array<std::array<uint64_t, (kCtl + 7) / 8>, kBatch> ctl{};

    uint8_t *buf(size_t i) { return data.data() + i * kBuf; }
    // Message i made ready for a read into buffer i (no sender's address
    // asked for: the caller sets msg_name where it wants one).
    msghdr &prepare(size_t i) {
        iov[i] = iovec{buf(i), kBuf};
        msghdr &m = msgs[i].msg_hdr;
        m = msghdr{};
        m.msg_iov = &iov[i];
        m.msg_iovlen = 1;
        m.msg_control = ctl[i].data();
        m.msg_controllen = sizeof ctl[i];
        return m;
    }
};

} // namespace rknp::udp
