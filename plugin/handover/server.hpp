// The parent's end of the tap hand-over: a SOCK_SEQPACKET unix socket in
// rootlesskit's state directory. The child connects, sends one Hello
// carrying the tap fd (SCM_RIGHTS) and waits for one Reply. The parent
// checks the peer's credentials (SO_PEERCRED: pid must be the rootlesskit
// child, uid the parent's own) and that the fd is the tap named in the Hello
// before it accepts.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

#include "common/fd.hpp"
#include "handover/messages.hpp"

namespace rknp::handover {

// Parent: a listening socket at path (stale files are replaced).
UniqueFd listen_socket(const std::string &path);

struct Accepted {
    UniqueFd tap;
    std::string ifname;
    bool vnet_hdr = false; // opened with IFF_VNET_HDR
};
// Parent: accepts one pending connection on listen_fd, checks the peer and
// the fd, hands the tap to adopt (which may throw to refuse it) and only
// then replies OK, so the child returns once the tap is in use. Throws
// Error on refusal (the peer has been told why). Waits at most timeout_ms
// for the Hello.
void accept_tap(int listen_fd, pid_t expected_pid, uid_t expected_uid,
                int timeout_ms, const std::function<void(Accepted &&)> &adopt);

} // namespace rknp::handover
