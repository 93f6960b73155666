// SPDX-License-Identifier: Apache-2.0

// slirp4netns' JSON API on a unix stream socket (api_socket.hpp): binding,
// who may connect, how many at once, and the clients' place in the poll
// loop.
#include "api_socket.hpp"

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

#include "cmd/common/errors.hpp"

namespace s4n {

namespace {

// New connections taken per poll round: bounded, so a flood of them
// cannot hold off signals, the exit fd or the clients already in.
constexpr size_t kAcceptBurst = ApiSocket::kMaxClients;

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

// " (N more since the last report)" when a LogLimiter held lines back.
std::string held_back(unsigned held) {
    if (held == 0) return "";
    return " (" + std::to_string(held) + " more since the last report)";
}

} // namespace

bool LogLimiter::allow(long now_ms, unsigned &suppressed) {
    if (any_ && now_ms < next_ms_) {
        held_++;
        return false;
    }
    any_ = true;
    next_ms_ = now_ms + period_ms_;
    suppressed = held_;
    held_ = 0;
    return true;
}

ApiSocket::ApiSocket(const std::string &path, ApiClient::Answer answer)
    : path_(path), answer_(std::move(answer)) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path)
        throw cmd::Failure("the specified API socket path is too long (>= " +
                           std::to_string(sizeof addr.sun_path) + ")");
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    // slirp4netns unlinks whatever is there (to avoid EADDRINUSE); only a
    // stale socket is ours to replace, any other file is the user's.
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            throw cmd::Failure("api socket: " + path +
                               " exists and is not a socket (left as it is)");
        ::unlink(path.c_str());
    }
    if (thread_count() > 1)
        throw cmd::Failure("api socket: must be bound before any thread "
                           "starts (the umask is the process's)");
    listen_.reset(
        ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!listen_) throw cmd::sys_failure("api socket: socket");
    {
        UmaskGuard mask(0177);
        if (::bind(listen_.get(), reinterpret_cast<sockaddr *>(&addr),
                   sizeof addr) < 0)
            throw cmd::sys_failure("api socket: bind " + path);
    }
    if (::lstat(path.c_str(), &st) == 0) {
        dev_ = st.st_dev;
        ino_ = st.st_ino;
    }
    if (::listen(listen_.get(), int(kMaxClients)) < 0) {
        int err = errno;
        ::unlink(path.c_str()); // no destructor runs: ours to remove here
        throw cmd::sys_failure("api socket: listen", err);
    }
}

ApiSocket::~ApiSocket() {
    // Inside --enable-sandbox the path may be out of reach (slirp4netns
    // leaves the file there too). Whatever replaced our socket stays.
    struct stat st {};
    if (::lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) &&
        st.st_dev == dev_ && st.st_ino == ino_)
        ::unlink(path_.c_str());
}

size_t ApiSocket::fill(std::vector<pollfd> &fds, long now_ms) {
    size_t first = fds.size();
    listening_ = now_ms >= accept_paused_until_;
    if (listening_) fds.push_back({listen_.get(), POLLIN, 0});
    for (const ApiClient &c : clients_) fds.push_back({c.fd(), c.events(), 0});
    return fds.size() - first;
}

int ApiSocket::timeout_ms(long now_ms) const {
    long next = LONG_MAX;
    if (now_ms < accept_paused_until_) next = accept_paused_until_;
    for (const ApiClient &c : clients_) next = std::min(next, c.deadline());
    if (next == LONG_MAX) return -1;
    return int(std::clamp(next - now_ms, 0L, long(INT_MAX)));
}

void ApiSocket::dispatch(std::span<const pollfd> mine, long now_ms) {
    size_t at = 0;
    bool incoming = false;
    if (listening_ && at < mine.size()) incoming = mine[at++].revents != 0;
    // The clients are those fill() listed, in its order: none came or went
    // since. Each steps on its own revents and its own deadline.
    for (ApiClient &c : clients_) {
        short revents = at < mine.size() ? mine[at++].revents : 0;
        c.step(revents, now_ms, answer_);
    }
    std::erase_if(clients_, [](const ApiClient &c) { return c.done(); });
    if (incoming) accept_some(now_ms);
}

void ApiSocket::accept_some(long now_ms) {
    for (size_t i = 0; i < kAcceptBurst; i++) {
        cmd::UniqueFd fd(::accept4(listen_.get(), nullptr, nullptr,
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
                                 "api_handler: accept: %s; not accepting for "
                                 "%ld ms%s\n",
                                 std::strerror(err), kAcceptPauseMs,
                                 held_back(held).c_str());
            } else if (accept_log_.allow(now_ms, held)) {
                std::fprintf(stderr, "api_handler: accept: %s%s\n",
                             std::strerror(err), held_back(held).c_str());
            }
            return;
        }
        if (clients_.size() >= kMaxClients) {
            unsigned held = 0;
            if (full_log_.allow(now_ms, held))
                std::fprintf(stderr,
                             "api_handler: %zu clients already, closing a new "
                             "one%s\n",
                             clients_.size(), held_back(held).c_str());
            continue; // closed unanswered
        }
        if (!peer_allowed(fd.get(), now_ms)) continue;
        clients_.emplace_back(std::move(fd), now_ms);
    }
}

// The socket's mode keeps others out of a directory they can reach; this
// holds whatever the directory and the mode are (and for clients that
// pass its check with CAP_DAC_OVERRIDE and another uid). The process's own
// uid and root (in the namespace the process is in now: rootlesskit's uid
// once the sandbox entered its user namespace) are the API's users.
bool ApiSocket::peer_allowed(int fd, long now_ms) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        return false;
    uid_t me = ::geteuid();
    if (cred.uid == me || cred.uid == 0) return true;
    unsigned held = 0;
    if (refused_log_.allow(now_ms, held))
        std::fprintf(stderr,
                     "api_handler: refused a client of uid %u (pid %d): only "
                     "uid %u and root may use the API%s\n",
                     unsigned(cred.uid), int(cred.pid), unsigned(me),
                     held_back(held).c_str());
    return false;
}

} // namespace s4n
