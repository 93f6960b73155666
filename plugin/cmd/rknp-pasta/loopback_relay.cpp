// SPDX-License-Identifier: Apache-2.0

// The relays between the namespace's loopback and the host's (see
// loopback_relay.hpp).
#include "loopback_relay.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace pasta {

namespace {

constexpr int kBatch = 64;      // accepts or datagrams a socket per round
constexpr int kPumpRounds = 32; // read/write rounds a TCP event
constexpr long kAcceptPauseMs = 1000;

bool same_peer(const sockaddr_storage &a, const sockaddr_storage &b) {
    if (a.ss_family != b.ss_family) return false;
    if (a.ss_family == AF_INET) {
        const auto &x = reinterpret_cast<const sockaddr_in &>(a);
        const auto &y = reinterpret_cast<const sockaddr_in &>(b);
        return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
    }
    const auto &x = reinterpret_cast<const sockaddr_in6 &>(a);
    const auto &y = reinterpret_cast<const sockaddr_in6 &>(b);
    return x.sin6_port == y.sin6_port &&
           std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof x.sin6_addr) == 0;
}

bool transient(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

// Closing with a zero linger sends an RST: the peer learns that its
// other end failed, as pasta tells a client whose host side refused.
void linger_zero(int fd) {
    linger l{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
}

// The host's side: sockets of this thread's namespace.
cmd::UniqueFd host_socket(int family, int type) {
    return cmd::UniqueFd(::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
}

} // namespace

cmd::UniqueFd LoopbackRelay::open_out(const Listener &l, int type) const {
    return l.where == Listen::in_ns ? host_socket(l.family, type) : open_(l.family, type);
}

socklen_t loopback_sockaddr(int family, uint16_t port, sockaddr_storage &ss) {
    std::memset(&ss, 0, sizeof ss);
    if (family == AF_INET) {
        auto *a = reinterpret_cast<sockaddr_in *>(&ss);
        a->sin_family = AF_INET;
        a->sin_port = htons(port);
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        return sizeof *a;
    }
    auto *a = reinterpret_cast<sockaddr_in6 *>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    a->sin6_addr = in6addr_loopback;
    return sizeof *a;
}

bool LoopbackRelay::add(int proto, int family, uint16_t listen_port,
                        uint16_t target_port, std::string &error, int &err, Listen where) {
    err = 0;
    for (const auto &l : listeners_)
        if (l->where == where && l->proto == proto && l->family == family &&
            l->listen_port == listen_port) {
            error = "listened on already";
            err = EEXIST;
            return false;
        }
    if (listeners_.size() >= kMaxListeners) {
        error = "more than " + std::to_string(kMaxListeners) + " listening sockets";
        err = EMFILE;
        return false;
    }
    const bool tcp = proto == IPPROTO_TCP;
    const int type = tcp ? SOCK_STREAM : SOCK_DGRAM;
    cmd::UniqueFd fd = where == Listen::in_ns ? open_(family, type) : host_socket(family, type);
    auto fail = [&](const char *what) {
        err = errno;
        error = std::string(what) + ": " + std::strerror(err);
        return false;
    };
    if (!fd) return fail("socket");
    int one = 1;
    if (tcp && ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0)
        return fail("SO_REUSEADDR");
    if (family == AF_INET6 &&
        ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0)
        return fail("IPV6_V6ONLY");
    sockaddr_storage ss;
    socklen_t len = loopback_sockaddr(family, listen_port, ss);
    if (::bind(fd.get(), reinterpret_cast<sockaddr *>(&ss), len) < 0) return fail("bind");
    if (tcp && ::listen(fd.get(), SOMAXCONN) < 0) return fail("listen");
    listeners_.push_back(std::make_unique<Listener>(
        Listener{where, proto, family, listen_port, target_port, std::move(fd)}));
    return true;
}

bool LoopbackRelay::listens(int proto, uint16_t listen_port, Listen where) const {
    return std::any_of(listeners_.begin(), listeners_.end(), [&](const auto &l) {
        return l->where == where && l->proto == proto && l->listen_port == listen_port;
    });
}

void LoopbackRelay::remove(int proto, uint16_t listen_port, Listen where) {
    auto match = [&](const Listener *l) {
        return l->where == where && l->proto == proto && l->listen_port == listen_port;
    };
    std::erase_if(flows_, [&](const auto &f) { return match(f->port); });
    std::erase_if(listeners_, [&](const auto &l) { return match(l.get()); });
}

std::size_t LoopbackRelay::fill(std::vector<pollfd> &fds, long now_ms) {
    refs_.clear();
    const std::size_t first = fds.size();
    auto add = [&](int fd, short events, Ref::Kind kind, void *p) {
        if (!events) return; // poll reports POLLHUP even for 0: leave it out
        fds.push_back({fd, events, 0});
        refs_.push_back({kind, p});
    };
    const bool accepting = pairs_.size() < kMaxTcpPairs && now_ms >= accept_paused_until_;
    for (auto &l : listeners_)
        if (l->proto == IPPROTO_UDP || accepting)
            add(l->fd.get(), POLLIN, Ref::listener, l.get());
    for (auto &t : pairs_) {
        if (t->connecting) {
            add(t->out.get(), POLLOUT, Ref::pair_out, t.get());
            continue;
        }
        short in = 0, out = 0;
        if (!t->to_out.full() && !t->in_eof) in |= POLLIN;
        if (!t->to_in.empty()) in |= POLLOUT;
        if (!t->to_in.full() && !t->out_eof) out |= POLLIN;
        if (!t->to_out.empty()) out |= POLLOUT;
        add(t->in.get(), in, Ref::pair_in, t.get());
        add(t->out.get(), out, Ref::pair_out, t.get());
    }
    for (auto &f : flows_) add(f->out.get(), POLLIN, Ref::flow, f.get());
    return fds.size() - first;
}

void LoopbackRelay::dispatch(std::span<const pollfd> mine, long now_ms) {
    for (std::size_t i = 0; i < mine.size() && i < refs_.size(); i++) {
        if (!mine[i].revents) continue;
        const Ref &r = refs_[i];
        switch (r.kind) {
        case Ref::listener: {
            auto &l = *static_cast<Listener *>(r.p);
            if (l.proto == IPPROTO_TCP)
                accept_tcp(l, now_ms);
            else
                receive_udp(l, now_ms);
            break;
        }
        case Ref::pair_in:
        case Ref::pair_out:
            pair_events(*static_cast<TcpPair *>(r.p));
            break;
        case Ref::flow:
            flow_events(*static_cast<UdpFlow *>(r.p), now_ms);
            break;
        }
    }
    refs_.clear(); // dead pairs and flows go now: no Ref may outlive them
    std::erase_if(pairs_, [](const auto &t) { return t->dead; });
    std::erase_if(flows_, [](const auto &f) { return f->dead; });
}

void LoopbackRelay::expire(long now_ms) {
    std::erase_if(flows_, [&](const auto &f) { return now_ms - f->last_ms >= kUdpIdleMs; });
}

void LoopbackRelay::accept_tcp(Listener &l, long now_ms) {
    for (int i = 0; i < kBatch && pairs_.size() < kMaxTcpPairs; i++) {
        cmd::UniqueFd in(::accept4(l.fd.get(), nullptr, nullptr,
                                   SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (!in) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                accept_paused_until_ = now_ms + kAcceptPauseMs;
            return;
        }
        sockaddr_storage ss;
        socklen_t len = loopback_sockaddr(l.family, l.target_port, ss);
        start_pair(std::move(in), open_out(l, SOCK_STREAM), ss, len);
    }
}

void LoopbackRelay::start_pair(cmd::UniqueFd in, cmd::UniqueFd out, const sockaddr_storage &to,
                               socklen_t len) {
    auto t = std::make_unique<TcpPair>();
    if (!t->to_out.open() || !t->to_in.open()) out.reset(); // out of fds: refused
    bool connected = false;
    if (out) {
        if (::connect(out.get(), reinterpret_cast<const sockaddr *>(&to), len) == 0)
            connected = true;
        else if (errno != EINPROGRESS)
            out.reset();
    }
    if (!out) {
        linger_zero(in.get()); // the other side's port refused (or no fd)
        return;
    }
    t->in = std::move(in);
    t->out = std::move(out);
    t->connecting = !connected;
    pairs_.push_back(std::move(t));
}

bool LoopbackRelay::splice(cmd::UniqueFd client, const sockaddr_storage &to, socklen_t len) {
    if (pairs_.size() >= kMaxTcpPairs) {
        linger_zero(client.get()); // it cannot wait in a backlog: refused now
        return false;
    }
    const std::size_t before = pairs_.size();
    start_pair(std::move(client), open_(to.ss_family, SOCK_STREAM), to, len);
    return pairs_.size() > before;
}

void LoopbackRelay::reset_both(TcpPair &t) {
    linger_zero(t.in.get());
    linger_zero(t.out.get());
    t.dead = true;
}

bool LoopbackRelay::Pipe::open() {
    int fds[2];
    if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0) return false;
    rd.reset(fds[0]);
    wr.reset(fds[1]);
    // Larger than the default 64 KiB where the user's pipe quota allows
    // (else the default stays): fewer splices a megabyte.
    (void)::fcntl(fds[1], F_SETPIPE_SZ, kPipeBytes);
    int size = ::fcntl(fds[1], F_GETPIPE_SZ);
    room = size > 0 ? std::size_t(size) : 4096;
    return true;
}

// One direction: splice(2) from the socket into the pipe while it has
// room, from the pipe into the other socket while it holds bytes, the
// peer's end of file passed on as shutdown(SHUT_WR) once all is written.
// false on a socket error (the pair is reset). Both sockets are
// non-blocking; SIGPIPE is ignored (signals.hpp).
bool LoopbackRelay::move(int from, int to, Pipe &p, bool &eof, bool &shut_to) {
    constexpr unsigned kFlags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;
    for (int round = 0; round < kPumpRounds; round++) {
        bool progress = false;
        if (!p.full() && !eof) {
            ssize_t n = ::splice(from, nullptr, p.wr.get(), nullptr, p.room - p.held, kFlags);
            if (n > 0) {
                p.held += std::size_t(n);
                progress = true;
            } else if (n == 0) {
                eof = true;
            } else if (!transient(errno)) {
                return false;
            }
        }
        if (!p.empty()) {
            ssize_t n = ::splice(p.rd.get(), nullptr, to, nullptr, p.held, kFlags);
            if (n > 0) {
                p.held -= std::size_t(n);
                progress = true;
            } else if (n < 0 && !transient(errno)) {
                return false;
            } else {
                break; // the other side is full: wait for POLLOUT
            }
        }
        if (!progress) break;
    }
    if (p.empty() && eof && !shut_to) {
        ::shutdown(to, SHUT_WR);
        shut_to = true;
    }
    return true;
}

void LoopbackRelay::pair_events(TcpPair &t) {
    if (t.dead) return;
    if (t.connecting) {
        int e = 0;
        socklen_t len = sizeof e;
        if (::getsockopt(t.out.get(), SOL_SOCKET, SO_ERROR, &e, &len) < 0) e = errno;
        if (e == EINPROGRESS || e == EALREADY) return;
        if (e != 0) {
            reset_both(t); // the other side's port refused: the client gets an RST
            return;
        }
        t.connecting = false;
    }
    if (!move(t.in.get(), t.out.get(), t.to_out, t.in_eof, t.out_shut) ||
        !move(t.out.get(), t.in.get(), t.to_in, t.out_eof, t.in_shut)) {
        reset_both(t);
        return;
    }
    if (t.in_shut && t.out_shut) t.dead = true; // both directions finished
}

void LoopbackRelay::receive_udp(Listener &l, long now_ms) {
    for (int i = 0; i < kBatch; i++) {
        sockaddr_storage from;
        socklen_t from_len = sizeof from;
        ssize_t n = ::recvfrom(l.fd.get(), datagram_.data(), datagram_.size(), MSG_DONTWAIT,
                               reinterpret_cast<sockaddr *>(&from), &from_len);
        if (n < 0) {
            if (transient(errno)) return;
            continue; // a queued error (ICMP): the next datagram
        }
        UdpFlow *f = nullptr;
        for (auto &c : flows_)
            if (c->port == &l && !c->dead && same_peer(c->client, from)) {
                f = c.get();
                break;
            }
        if (!f) {
            if (flows_.size() >= kMaxUdpFlows) continue; // dropped
            cmd::UniqueFd out = open_out(l, SOCK_DGRAM);
            sockaddr_storage ss;
            socklen_t len = loopback_sockaddr(l.family, l.target_port, ss);
            if (!out || ::connect(out.get(), reinterpret_cast<sockaddr *>(&ss), len) < 0)
                continue;
            auto flow = std::make_unique<UdpFlow>();
            flow->port = &l;
            flow->client = from;
            flow->client_len = from_len;
            flow->out = std::move(out);
            f = flow.get();
            flows_.push_back(std::move(flow));
        }
        f->last_ms = now_ms;
        ::send(f->out.get(), datagram_.data(), std::size_t(n), MSG_DONTWAIT); // lost if full, as UDP
    }
}

void LoopbackRelay::flow_events(UdpFlow &f, long now_ms) {
    if (f.dead) return;
    for (int i = 0; i < kBatch; i++) {
        ssize_t n = ::recv(f.out.get(), datagram_.data(), datagram_.size(), MSG_DONTWAIT);
        if (n < 0) {
            if (transient(errno)) return;
            continue; // ECONNREFUSED and the like, queued by an ICMP error
        }
        f.last_ms = now_ms;
        ::sendto(f.port->fd.get(), datagram_.data(), std::size_t(n), MSG_DONTWAIT,
                 reinterpret_cast<const sockaddr *>(&f.client), f.client_len);
    }
}

} // namespace pasta
