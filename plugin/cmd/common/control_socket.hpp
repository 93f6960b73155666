// SPDX-License-Identifier: Apache-2.0

// A command's control socket (rknp-slirp4netns's --api-socket,
// rknp-pasta's -c): a unix stream socket and its clients, served from the
// command's poll loop, one request per connection (ControlClient) in what
// the ControlProtocol speaks.
//
// What the socket guarantees: it is created mode 0600 whatever the umask;
// only a stale socket (one nobody listens on) is replaced, never a live
// one or another kind of file; only the process's own uid and root may
// talk to it (SO_PEERCRED; others are closed unanswered); up to
// kMaxClients clients are served at once, each against its own deadlines;
// accept(2) running out of fds pauses accepting instead of spinning.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "control_client.hpp"
#include "control_protocol.hpp"
#include "log_limiter.hpp"
#include "unique_fd.hpp"

namespace cmd {

class ControlSocket {
public:
    // Clients served at once; more are closed as soon as accepted (each
    // holds an fd and a 4 KB buffer for up to two deadlines).
    static constexpr std::size_t kMaxClients = 16;
    // accept(2) failing for want of fds or memory stops accepting this
    // long: the pending connection would make poll(2) return at once.
    static constexpr long kAcceptPauseMs = 1000;

    // Binds and listens; throws Failure, its message starting with `what`
    // (the option: "api socket", "-c/--conf-path"). Call while the process
    // has one thread: the socket's mode comes from a temporary umask.
    // protocol must outlive the socket.
    ControlSocket(const std::string &path, ControlProtocol &protocol,
                  const std::string &what);
    ~ControlSocket();
    ControlSocket(const ControlSocket &) = delete;
    ControlSocket &operator=(const ControlSocket &) = delete;

    // Appends what to poll (the listener unless accepting is paused, each
    // client); returns how many were appended.
    std::size_t fill(std::vector<pollfd> &fds, long now_ms);
    // How long poll may sleep: to the nearest deadline or the end of a
    // pause; -1 for no limit.
    int timeout_ms(long now_ms) const;
    // After poll: `mine` is what fill appended, revents set. Never throws
    // on a client's account.
    void dispatch(std::span<const pollfd> mine, long now_ms);

    std::size_t clients() const { return clients_.size(); }

private:
    void accept_some(long now_ms);
    bool peer_allowed(int fd, long now_ms);

    std::string path_;
    dev_t dev_ = 0; // the socket file this process made: removed only if it
    ino_t ino_ = 0; // is still there
    UniqueFd listen_;
    ControlProtocol &protocol_;
    std::vector<ControlClient> clients_;
    bool listening_ = false; // fill() put the listener in the poll set
    long accept_paused_until_ = 0;
    LogLimiter refused_log_{1000};
    LogLimiter full_log_{1000};
    LogLimiter accept_log_{1000};
};

} // namespace cmd
