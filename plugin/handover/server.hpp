// SPDX-License-Identifier: Apache-2.0

// The parent's end of the tap hand-over: a SOCK_SEQPACKET unix socket in
// rootlesskit's state directory, served without ever blocking the stack
// thread. The child connects; the parent checks its credentials
// (SO_PEERCRED: pid must be the rootlesskit child, uid the parent's own)
// and only then greets it with the parent token; the child checks that
// token before it sends one Hello with the child token and the tap fd
// (SCM_RIGHTS); the parent checks the token and that the fd is the tap
// named in the Hello, adopts it and replies. A peer that stays silent is
// refused after its deadline, and others are served meanwhile.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/fd.hpp"
#include "handover/messages.hpp"

namespace rknp::handover {

// Parent: a listening socket at state_dir + "/" + name. The directory must
// be a directory (not a symlink) owned by the caller's euid and writable by
// no one else, or someone else could replace the socket; the socket file
// is created with mode 0600 (stale files are replaced). Throws Error.
UniqueFd listen_socket(const std::string &state_dir, const std::string &name);

struct Accepted {
    UniqueFd tap;
    std::string ifname;
    bool vnet_hdr = false; // opened with IFF_VNET_HDR
};

class Server {
public:
    // At most this many connections wait for their Hello at once; more
    // are refused (only the child's pid gets this far).
    static constexpr size_t kMaxPending = 4;

    Server(UniqueFd listen_fd, pid_t expected_pid, uid_t expected_uid,
           const Tokens &tokens, int hello_timeout_ms);

    // False once a tap has been adopted: one tap per parent.
    bool listening() const { return listen_.valid(); }
    int listen_fd() const { return listen_.get(); }
    // Connections greeted and waiting for their Hello (no allocation: the
    // loop asks every round).
    size_t pending() const { return pending_.size(); }
    int pending_fd(size_t i) const { return pending_[i].conn.get(); }
    // Milliseconds until the first pending deadline, -1 if none.
    int64_t ms_until_deadline(int64_t now_ms) const;

    // Accepts one connection (the listening socket is readable): greets
    // a peer that passes the credential check, else replies why and throws
    // Error(RKNP_ERR_PERMISSION). Never blocks.
    void accept_one(int64_t now_ms);
    // The pending connection fd is readable: checks its Hello, hands the
    // tap to adopt (which may throw to refuse it), replies OK and stops
    // listening. Throws Error on refusal (the peer has been told why).
    void receive(int fd, const std::function<void(Accepted &&)> &adopt);
    // Refuses pending peers whose deadline passed (told RKNP_ERR_TIMEOUT);
    // returns one message each.
    std::vector<std::string> expire(int64_t now_ms);

private:
    struct Pending {
        UniqueFd conn;
        int64_t deadline_ms;
    };

    UniqueFd listen_;
    pid_t expected_pid_;
    uid_t expected_uid_;
    Tokens tokens_;
    int hello_timeout_ms_;
    std::vector<Pending> pending_;
};

} // namespace rknp::handover
