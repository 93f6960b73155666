// SPDX-License-Identifier: Apache-2.0

// The relays between the namespace's loopback and the host's, as pasta
// splices them: -T/-U listen on the namespace's loopback (127.0.0.1, ::1)
// and carry each connection accepted there (TCP) or each client's
// datagrams (UDP) to the same family's loopback on the host, at the
// mapped port; --host-lo-to-ns-lo listens on the host's loopback for a
// port the namespace listens on only at its own, and carries the other
// way (the namespace sees its client come from its loopback); splice
// carries a -t forward's loopback client, which the library hands over,
// into the namespace (to its address, or its loopback with
// --host-lo-to-ns-lo), as pasta splices them. Served from
// rknp-pasta's poll loop (fill, dispatch, expire) with fixed buffers: a
// TCP pair holds a pipe each way from its accept on, through which
// splice(2) moves the bytes (pages, not copies: through a -t forward
// from the host's loopback, iperf3, medians of 3, 0.25-0.34 CPU seconds
// a GB where recv/send through two 32 KiB buffers took 0.34-0.57, at
// about the same rate), UDP shares one datagram buffer; nothing is
// allocated per read. The namespace's
// sockets come from an opener (the thread of ns_sockets.hpp; tests pass
// their own); the host's are made here, on the calling thread, in the
// host's namespace.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cmd/common/unique_fd.hpp"

namespace pasta {

// The loopback address of family (AF_INET: 127.0.0.1, AF_INET6: ::1) at
// port, in ss; returns its length.
socklen_t loopback_sockaddr(int family, uint16_t port, sockaddr_storage &ss);

class LoopbackRelay {
public:
    using Opener = std::function<cmd::UniqueFd(int family, int type)>;
    // Where a relay listens; it connects on the other side.
    enum class Listen { in_ns, on_host };

    // Asked for each direction: fewer splices a megabyte than the default
    // 64 KiB, yet 128 pairs before the user's pipe quota (pipe-user-pages-
    // soft, 64 MiB) would shrink every new pipe of the user's to 8 KiB.
    static constexpr int kPipeBytes = 262144;
    static constexpr std::size_t kMaxTcpPairs = 1024;  // then accepting waits
    static constexpr std::size_t kMaxUdpFlows = 1024;  // then new clients' datagrams drop
    static constexpr long kUdpIdleMs = 180000;         // pasta's UDP flow timeout
    static constexpr std::size_t kMaxListeners = 4096; // sockets, both families

    explicit LoopbackRelay(Opener ns_open) : open_(std::move(ns_open)) { refs_.reserve(64); }
    LoopbackRelay(const LoopbackRelay &) = delete;
    LoopbackRelay &operator=(const LoopbackRelay &) = delete;

    // Listens on the loopback of family (AF_INET: 127.0.0.1, AF_INET6:
    // ::1) at listen_port, in the namespace or on the host (where), and
    // relays to the other side's loopback of the same family at
    // target_port. proto: IPPROTO_TCP or IPPROTO_UDP. false with the
    // reason in error (the bind's errno in err).
    bool add(int proto, int family, uint16_t listen_port, uint16_t target_port,
             std::string &error, int &err, Listen where = Listen::in_ns);
    // Stops listening at listen_port on that side (both families);
    // established TCP pairs keep running, the port's UDP flows end.
    void remove(int proto, uint16_t listen_port, Listen where = Listen::in_ns);
    bool listens(int proto, uint16_t listen_port, Listen where = Listen::in_ns) const;
    // A TCP connection accepted elsewhere (a -t forward's loopback client,
    // handed over by the library: loopback_handoff.hpp), relayed to `to`
    // from a socket opened in the namespace. false, the client reset,
    // when it cannot be: kMaxTcpPairs run, no socket, or the connect
    // failed at once (refused). A refusal that comes later resets it too.
    bool splice(cmd::UniqueFd client, const sockaddr_storage &to, socklen_t len);

    // Appends what to poll; returns how many. A TCP listener is left out
    // while kMaxTcpPairs run or after accept(2) ran out of fds (for a
    // second: its pending connection would wake poll at once).
    std::size_t fill(std::vector<pollfd> &fds, long now_ms);
    // After poll: `mine` is what fill appended, revents set.
    void dispatch(std::span<const pollfd> mine, long now_ms);
    // Ends UDP flows idle for kUdpIdleMs.
    void expire(long now_ms);

    std::size_t listeners() const { return listeners_.size(); }
    std::size_t tcp_pairs() const { return pairs_.size(); }
    std::size_t udp_flows() const { return flows_.size(); }

private:
    struct Listener {
        Listen where;
        int proto, family;
        uint16_t listen_port, target_port;
        cmd::UniqueFd fd;
    };
    // One direction's bytes between the socket that gave them and the one
    // that takes them: `held` of them in a pipe that takes `room`.
    struct Pipe {
        cmd::UniqueFd rd, wr;
        std::size_t held = 0, room = 0;
        bool empty() const { return held == 0; }
        bool full() const { return held >= room; }
        bool open(); // false: no pipe (errno)
    };
    struct TcpPair {
        cmd::UniqueFd in, out;       // accepted; connecting to the other side
        bool connecting = true;
        Pipe to_out, to_in;
        bool in_eof = false, out_eof = false;   // read end of file
        bool in_shut = false, out_shut = false; // shutdown(SHUT_WR) done
        bool dead = false;
    };
    struct UdpFlow {
        Listener *port;
        sockaddr_storage client;
        socklen_t client_len;
        cmd::UniqueFd out;           // connected to the other side's loopback
        long last_ms;
        bool dead = false;
    };
    struct Ref {
        enum Kind { listener, pair_in, pair_out, flow } kind;
        void *p;
    };

    void accept_tcp(Listener &l, long now_ms);
    // in, accepted, to `to` through out (unconnected; invalid: no socket).
    void start_pair(cmd::UniqueFd in, cmd::UniqueFd out, const sockaddr_storage &to,
                    socklen_t len);
    void receive_udp(Listener &l, long now_ms);
    void pair_events(TcpPair &t);
    void flow_events(UdpFlow &f, long now_ms);
    static bool move(int from, int to, Pipe &p, bool &eof, bool &shut_to);
    static void reset_both(TcpPair &t);

    // A socket on the side opposite to where l listens.
    cmd::UniqueFd open_out(const Listener &l, int type) const;

    Opener open_;
    std::vector<std::unique_ptr<Listener>> listeners_;
    std::vector<std::unique_ptr<TcpPair>> pairs_;
    std::vector<std::unique_ptr<UdpFlow>> flows_;
    std::vector<Ref> refs_; // parallel to fill's pollfds, reused
    long accept_paused_until_ = 0;
    std::array<char, 65536> datagram_{};
};

} // namespace pasta
