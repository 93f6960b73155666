// SPDX-License-Identifier: Apache-2.0

// One message carrying one fd (SCM_RIGHTS) on a unix socket, each way:
// the tap's hand-over, a TCP forward's loopback clients handed to the
// caller (RKNP_FORWARD_HANDOFF_LOOPBACK) and rknp-pasta taking them.
// Header-only, with no library code, so that the commands (built on the
// public ABI alone) share it, as they share fd.hpp.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>

#include "common/fd.hpp"

namespace rknp {

// sendmsg of len bytes of data with fd; returns sendmsg's result.
inline ssize_t send_with_fd(int sock, const void *data, size_t len, int fd, int flags) {
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    iovec iov{const_cast<void *>(data), len};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control;
    mh.msg_controllen = sizeof control;
    cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
    return ::sendmsg(sock, &mh, flags);
}

// One recvmsg (flags, plus MSG_CMSG_CLOEXEC) of up to len bytes into
// data. Of the fds the message carried, the first goes to keep if keep is
// empty; the rest are closed. msg_flags gets the message's flags
// (MSG_CTRUNC: fds were lost). Returns recvmsg's result.
inline ssize_t recv_with_fd(int sock, void *data, size_t len, UniqueFd &keep, int &msg_flags,
                            int flags) {
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    iovec iov{data, len};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control;
    mh.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
    if (n < 0) return n;
    for (cmsghdr *c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (!keep) keep.reset(fd);
            else ::close(fd);
        }
    }
    msg_flags = mh.msg_flags;
    return n;
}

} // namespace rknp
