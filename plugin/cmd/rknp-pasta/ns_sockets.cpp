// SPDX-License-Identifier: Apache-2.0

// Sockets inside the target's network namespace (see ns_sockets.hpp).
#include "ns_sockets.hpp"

#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "cmd/common/errors.hpp"

namespace pasta {

namespace {

struct Request {
    int family, type;
};
struct Reply {
    int fd, err;
};

constexpr int kEnteredFailed = -1; // Reply::err: `entered` threw

// The thread: enter the namespace, report, then answer each request
// until the other end closes. Every fd it makes goes to the asker at
// once, so nothing is left here when it ends.
void serve(int netns, int peer, const std::function<void()> &entered) {
    Reply r{-1, 0};
    if (::setns(netns, CLONE_NEWNET) < 0) r.err = errno;
    ::close(netns);
    if (r.err == 0 && entered) {
        try {
            entered();
        } catch (...) {
            r.err = kEnteredFailed;
        }
    }
    const bool ready = r.err == 0;
    if (::send(peer, &r, sizeof r, MSG_NOSIGNAL) != ssize_t(sizeof r) || !ready) {
        ::close(peer);
        return;
    }
    for (;;) {
        Request q{};
        ssize_t n = ::recv(peer, &q, sizeof q, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n != ssize_t(sizeof q)) break; // closed (or garbage: same end)
        r.fd = ::socket(q.family, q.type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        r.err = r.fd < 0 ? errno : 0;
        if (::send(peer, &r, sizeof r, MSG_NOSIGNAL) != ssize_t(sizeof r)) {
            if (r.fd >= 0) ::close(r.fd);
            break;
        }
    }
    ::close(peer);
}

ssize_t recv_full(int fd, void *buf, size_t len) {
    ssize_t n;
    do
        n = ::recv(fd, buf, len, 0);
    while (n < 0 && errno == EINTR);
    return n;
}

} // namespace

NsSockets::NsSockets(cmd::UniqueFd netns, std::function<void()> entered) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        throw cmd::sys_failure("socketpair");
    ask_.reset(sv[0]);
    int ns = netns.release();
    try {
        thread_ = std::thread(serve, ns, sv[1], std::move(entered));
    } catch (...) {
        ::close(ns);
        ::close(sv[1]);
        throw;
    }
    Reply r{-1, EPROTO};
    if (recv_full(ask_.get(), &r, sizeof r) != ssize_t(sizeof r) || r.err != 0) {
        int err = r.err ? r.err : EPROTO;
        ask_.reset();
        thread_.join();
        if (err == kEnteredFailed)
            throw cmd::Failure("the thread in the namespace could not drop its "
                               "capabilities");
        throw cmd::sys_failure("cannot enter the namespace for sockets there "
                               "(-T/-U, --host-lo-to-ns-lo, -t's loopback "
                               "clients): setns", err);
    }
}

NsSockets::~NsSockets() {
    ask_.reset(); // the thread reads end of file and returns
    if (thread_.joinable()) thread_.join();
}

cmd::UniqueFd NsSockets::open(int family, int type) const {
    Request q{family, type};
    Reply r{-1, EPROTO};
    if (::send(ask_.get(), &q, sizeof q, MSG_NOSIGNAL) != ssize_t(sizeof q) ||
        recv_full(ask_.get(), &r, sizeof r) != ssize_t(sizeof r)) {
        errno = EPIPE;
        return {};
    }
    if (r.fd < 0) errno = r.err;
    return cmd::UniqueFd(r.fd);
}

} // namespace pasta
