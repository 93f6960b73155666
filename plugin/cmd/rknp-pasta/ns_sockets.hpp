// SPDX-License-Identifier: Apache-2.0

// Sockets inside the target's network namespace, for -T/-U's listeners on
// its loopback, --host-lo-to-ns-lo's connections to it and the splice of
// -t's loopback clients: a thread that entered the namespace (setns) at start,
// before seccomp forbids setns, and from then on opens sockets there on
// request. A socket belongs to the namespace of the thread that created
// it, and the fd is the process's, so every other use (bind, listen,
// accept, the relay) happens on the serving thread. The thread lives as
// long as this object; the namespace stays referenced by its sockets only.
#pragma once

#include <functional>
#include <thread>

#include "cmd/common/unique_fd.hpp"

namespace pasta {

class NsSockets {
public:
    // Starts the thread and waits until it has entered netns (an fd of
    // the namespace, e.g. /proc/PID/ns/net) and run `entered` there (the
    // sandbox's drop_capabilities: the thread needed CAP_SYS_ADMIN for
    // setns, and capabilities are a thread's). Throws cmd::Failure if it
    // cannot (no CAP_SYS_ADMIN over the namespace: a plain user with
    // --netns and no user namespace) or `entered` threw. Call with every
    // signal blocked: the thread inherits the mask.
    explicit NsSockets(cmd::UniqueFd netns, std::function<void()> entered = {});
    ~NsSockets();
    NsSockets(const NsSockets &) = delete;
    NsSockets &operator=(const NsSockets &) = delete;

    // socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0) inside the
    // namespace; an invalid fd with errno set on failure. Blocks for the
    // thread's answer (a round trip over a socket pair).
    cmd::UniqueFd open(int family, int type) const;

private:
    cmd::UniqueFd ask_;   // this end of the socket pair
    std::thread thread_;
};

} // namespace pasta
