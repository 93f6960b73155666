// SPDX-License-Identifier: Apache-2.0

// A command's control socket (control_socket.hpp): binding, who may
// connect, how many at once, and the clients' place in the poll loop.
#include "control_socket.hpp"

#include <dirent.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>

#include "errors.hpp"

namespace cmd {

namespace {

// New connections taken per poll round: bounded, so a flood of them
// cannot hold off signals, the exit fd or the clients already in.
constexpr std::size_t kAcceptBurst = ControlSocket::kMaxClients;

// The socket file's mode is 0777 less the umask at bind(2): the only way
// to have it 0600 from the start (fchmod or chmod after bind leave a
// window in which anyone may connect).
class UmaskGuard {
public:
    explicit UmaskGuard(mode_t mask) : old_(::umask(mask)) {}
    ~UmaskGuard() { ::umask(old_); }
    UmaskGuard(const UmaskGuard &) = delete;
    UmaskGuard &operator=(const UmaskGuard &) = delete;

private:
    mode_t old_;
};

// Threads share the umask: a temporary one is safe only in a process of
// one thread. -1 when /proc cannot tell.
int thread_count() {
    std::unique_ptr<DIR, int (*)(DIR *)> dir(::opendir("/proc/self/task"),
                                             ::closedir);
    if (!dir) return -1;
    int n = 0;
    while (const dirent *e = ::readdir(dir.get()))
        if (e->d_name[0] != '.') n++;
    return n;
}

// Throws unless the socket file at addr is stale: a connect(2) that nobody
// listens behind is refused (ECONNREFUSED). A connect that succeeds or
// finds the backlog full (EAGAIN) means another process serves it, and it
// is not ours to take; any other error leaves the question open, so the
// file stays too. Non-blocking: a full backlog must not hang the start.
void require_stale(const sockaddr_un &addr, const std::string &what,
                  const std::string &path) {
    UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!probe) throw sys_failure(what + ": socket");
    if (::connect(probe.get(), reinterpret_cast<const sockaddr *>(&addr),
                  sizeof addr) == 0 ||
        errno == EAGAIN)
        throw Failure(what + ": " + path +
                      " is in use: another process listens on it (left as it is)");
    int err = errno;
    if (err == ECONNREFUSED || err == ENOENT) return;
    throw Failure(what + ": " + path + " exists and cannot be probed (" +
                  std::strerror(err) + "; left as it is)");
}

} // namespace

ControlSocket::ControlSocket(const std::string &path, ControlProtocol &protocol,
                             const std::string &what)
    : path_(path), protocol_(protocol) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.empty() || path.size() >= sizeof addr.sun_path)
        throw Failure(what + ": '" + path + "' does not fit a socket address (1 to " +
                      std::to_string(sizeof addr.sun_path - 1) + " bytes)");
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    // slirp4netns unlinks whatever is there (to avoid EADDRINUSE); only a
    // stale socket is ours to replace, any other file is the user's and a
    // live socket another process's.
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            throw Failure(what + ": " + path +
                          " exists and is not a socket (left as it is)");
        require_stale(addr, what, path);
        ::unlink(path.c_str());
    }
    if (thread_count() > 1)
        throw Failure(what + ": must be bound before any thread starts (the "
                             "umask is the process's)");
    listen_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!listen_) throw sys_failure(what + ": socket");
    {
        UmaskGuard mask(0177);
        if (::bind(listen_.get(), reinterpret_cast<sockaddr *>(&addr),
                   sizeof addr) < 0)
            throw sys_failure(what + ": bind " + path);
    }
    if (::lstat(path.c_str(), &st) == 0) {
        dev_ = st.st_dev;
        ino_ = st.st_ino;
    }
    if (::listen(listen_.get(), int(kMaxClients)) < 0) {
        int err = errno;
        ::unlink(path.c_str()); // no destructor runs: ours to remove here
        throw sys_failure(what + ": listen", err);
    }
}

ControlSocket::~ControlSocket() {
    // Inside the sandbox the path may be out of reach (the file stays,
    // stale, and the next start replaces it). Whatever replaced our socket
    // stays.
    struct stat st {};
    if (::lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) &&
        st.st_dev == dev_ && st.st_ino == ino_)
        ::unlink(path_.c_str());
}

std::size_t ControlSocket::fill(std::vector<pollfd> &fds, long now_ms) {
    std::size_t first = fds.size();
    listening_ = now_ms >= accept_paused_until_;
    if (listening_) fds.push_back({listen_.get(), POLLIN, 0});
    for (const ControlClient &c : clients_) fds.push_back({c.fd(), c.events(), 0});
    return fds.size() - first;
}

int ControlSocket::timeout_ms(long now_ms) const {
    long next = LONG_MAX;
    if (now_ms < accept_paused_until_) next = accept_paused_until_;
    for (const ControlClient &c : clients_) next = std::min(next, c.deadline());
    if (next == LONG_MAX) return -1;
    return int(std::clamp(next - now_ms, 0L, long(INT_MAX)));
}

void ControlSocket::dispatch(std::span<const pollfd> mine, long now_ms) {
    std::size_t at = 0;
    bool incoming = false;
    if (listening_ && at < mine.size()) incoming = mine[at++].revents != 0;
    // The clients are those fill() listed, in its order: none came or went
    // since. Each steps on its own revents and its own deadline.
    for (ControlClient &c : clients_) {
        short revents = at < mine.size() ? mine[at++].revents : 0;
        c.step(revents, now_ms, protocol_);
    }
    std::erase_if(clients_, [](const ControlClient &c) { return c.done(); });
    if (incoming) accept_some(now_ms);
}

void ControlSocket::accept_some(long now_ms) {
    const char *tag = protocol_.tag();
    for (std::size_t i = 0; i < kAcceptBurst; i++) {
        UniqueFd fd(::accept4(listen_.get(), nullptr, nullptr,
                              SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (!fd) {
            int err = errno;
            if (err == EINTR || err == ECONNABORTED) continue;
            if (err == EAGAIN || err == EWOULDBLOCK) return;
            unsigned held = 0;
            if (err == EMFILE || err == ENFILE || err == ENOBUFS ||
                err == ENOMEM) {
                // The connection stays queued and the listener readable:
                // polling it now would spin. Off the poll set for a while;
                // one line per pause.
                accept_paused_until_ = now_ms + kAcceptPauseMs;
                if (accept_log_.allow(now_ms, held))
                    std::fprintf(stderr,
                                 "%s: accept: %s; not accepting for %ld ms%s\n",
                                 tag, std::strerror(err), kAcceptPauseMs,
                                 LogLimiter::held_back(held).c_str());
            } else if (accept_log_.allow(now_ms, held)) {
                std::fprintf(stderr, "%s: accept: %s%s\n", tag,
                             std::strerror(err), LogLimiter::held_back(held).c_str());
            }
            return;
        }
        if (clients_.size() >= kMaxClients) {
            unsigned held = 0;
            if (full_log_.allow(now_ms, held))
                std::fprintf(stderr,
                             "%s: %zu clients already, closing a new one%s\n",
                             tag, clients_.size(), LogLimiter::held_back(held).c_str());
            continue; // closed unanswered
        }
        if (!peer_allowed(fd.get(), now_ms)) continue;
        clients_.emplace_back(std::move(fd), now_ms);
    }
}

// The socket's mode keeps others out of a directory they can reach; this
// holds whatever the directory and the mode are (and for clients that
// pass its check with CAP_DAC_OVERRIDE and another uid). The process's own
// uid and root (in the namespace the process is in now: the caller's uid
// once the sandbox entered a rootless user namespace) are the socket's
// users.
bool ControlSocket::peer_allowed(int fd, long now_ms) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        return false;
    uid_t me = ::geteuid();
    if (cred.uid == me || cred.uid == 0) return true;
    unsigned held = 0;
    if (refused_log_.allow(now_ms, held))
        std::fprintf(stderr,
                     "%s: refused a client of uid %u (pid %d): only uid %u and "
                     "root may use the socket%s\n",
                     protocol_.tag(), unsigned(cred.uid), int(cred.pid),
                     unsigned(me), LogLimiter::held_back(held).c_str());
    return false;
}

} // namespace cmd
