// SPDX-License-Identifier: Apache-2.0

// slirp4netns' JSON API on a unix stream socket (--api-socket): the
// listening socket and its clients, served from the command's poll loop.
// One request per connection (ApiClient); the requests themselves are
// HostFwdApi's.
//
// What the socket guarantees: it is created mode 0600 whatever the umask;
// only a stale socket is replaced, never another kind of file; only the
// process's own uid and root may talk to it (SO_PEERCRED; others are closed
// unanswered); up to kMaxClients clients are served at once, each against
// its own deadlines; accept(2) running out of fds pauses accepting instead
// of spinning.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "api_client.hpp"
#include "cmd/common/unique_fd.hpp"

namespace s4n {

// At most one line per period; the lines it held back are counted in the
// next one.
class LogLimiter {
public:
    explicit LogLimiter(long period_ms) : period_ms_(period_ms) {}
    // True when a line may be printed now; `suppressed` is how many were
    // held back since the last one.
    bool allow(long now_ms, unsigned &suppressed);

private:
    long period_ms_;
    long next_ms_ = 0;
    bool any_ = false;
    unsigned held_ = 0;
};

class ApiSocket {
public:
    // Clients served at once; more are closed as soon as accepted (each
    // holds an fd and a 4 KB buffer for up to two deadlines).
    static constexpr size_t kMaxClients = 16;
    // accept(2) failing for want of fds or memory stops accepting this
    // long: the pending connection would make poll(2) return at once.
    static constexpr long kAcceptPauseMs = 1000;

    // Binds and listens; throws cmd::Failure. Call while the process has
    // one thread: the socket's mode comes from a temporary umask.
    ApiSocket(const std::string &path, ApiClient::Answer answer);
    ~ApiSocket();
    ApiSocket(const ApiSocket &) = delete;
    ApiSocket &operator=(const ApiSocket &) = delete;

    // Appends what to poll (the listener unless accepting is paused, each
    // client); returns how many were appended.
    size_t fill(std::vector<pollfd> &fds, long now_ms);
    // How long poll may sleep: to the nearest deadline or the end of a
    // pause; -1 for no limit.
    int timeout_ms(long now_ms) const;
    // After poll: `mine` is what fill appended, revents set. Never throws
    // on a client's account.
    void dispatch(std::span<const pollfd> mine, long now_ms);

    size_t clients() const { return clients_.size(); }

private:
    void accept_some(long now_ms);
    bool peer_allowed(int fd, long now_ms);

    std::string path_;
    dev_t dev_ = 0; // the socket file this process made: removed only if it
    ino_t ino_ = 0; // is still there
    cmd::UniqueFd listen_;
    ApiClient::Answer answer_;
    std::vector<ApiClient> clients_;
    bool listening_ = false; // fill() put the listener in the poll set
    long accept_paused_until_ = 0;
    LogLimiter refused_log_{1000};
    LogLimiter full_log_{1000};
    LogLimiter accept_log_{1000};
};

} // namespace s4n
