// SPDX-License-Identifier: Apache-2.0

// Ends libslirp's forwarded TCP connections whose host side is gone, so a
// client that reuses its address and port finds no stale twin. libslirp
// 4.7.0 stops watching a host socket once it has read its EOF, so when
// that client later resets (or the socket closes both ways) libslirp does
// not notice: it keeps the connection until the guest ends it, or for up
// to 10 minutes (FIN_WAIT_2's idle bound). The guest sees a forwarded
// client at the client's own address and port (127.0.0.0/8 as the
// gateway), so when the client connects again from the same port, libslirp
// holds two connections with one 4-tuple and hands the guest's segments
// of both to whichever it finds first: the old one never completes and the
// new one never connects (its client's bytes are lost). The kernel admits
// that new connection only once the old host socket has left the
// established table, which is exactly when the socket reports a hangup.
//
// So: the poll set keeps watching these sockets for a hangup alone
// (PollSet::watch_hangup), and on one, before libslirp accepts again, the
// connection is reset both ways, as libslirp's own read of ECONNRESET
// would (tcp_drop): a reset "from the guest" at the sequence libslirp
// expects next (acking its SYN if the guest never answered it), and one
// to the guest at libslirp's next sequence, so that the guest's end is
// gone before a reconnecting client's SYN reaches it. On a reset (the
// socket's error) at once; on a close both ways only once the guest has
// acknowledged libslirp's FIN, every byte for it delivered. Stack thread
// only; state per forwarded connection, nothing allocated per frame.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "datapath/flows/endpoints.hpp"
#include "datapath/forward_spec.hpp"

namespace rknp {

class ForwardReaper {
public:
    // gateway4 (host order) and gateway6: where libslirp shows clients on
    // the host's loopback (or unspecified) address to the guest.
    ForwardReaper(uint32_t gateway4, const uint8_t gateway6[16]);

    // TCP forwards as libslirp holds them (UDP ones are ignored).
    void add_forward(const ForwardSpec &f);
    void remove_forward(const ForwardSpec &f);

    // A socket libslirp registered: true when it is a connection accepted
    // on a forward, now tracked (its hangup must be watched).
    bool on_register(int fd);
    void on_unregister(int fd);

    // Frames libslirp sends the guest, and guest frames on their way to
    // libslirp: the tracked connections' ACKs and FINs.
    void from_slirp(std::span<const uint8_t> frame);
    void from_guest(std::span<const uint8_t> frame);

    // A tracked socket libslirp no longer watches reported a hangup;
    // reset: with an error (its client reset it).
    void host_gone(int fd, bool reset);

    // The frames due, each whole (checksums complete): a reset into
    // slirp_input (to_guest false) or one for the guest's end. The span
    // is valid until the next call.
    bool next_due(std::span<const uint8_t> &frame, bool &to_guest);

    size_t tracked() const { return flows_.size(); }
    // Connections ended since construction.
    uint64_t reaped() const { return reaped_; }

private:
    struct Key {
        uint8_t guest[16]{}, remote[16]{}; // IPv4 as IPv4-mapped
        uint16_t guest_port = 0, remote_port = 0;
        bool operator==(const Key &) const = default;
    };
    struct KeyHash {
        size_t operator()(const Key &k) const noexcept;
    };
    struct Flow {
        int fd = -1;
        bool v6 = false;
        bool have_syn = false; // libslirp's SYN seen: iss, snd_nxt known
        bool have_ack = false; // rcv_nxt known
        bool fin_sent = false;
        bool fin_acked = false;
        bool host_gone = false;
        bool reaped = false;   // its resets made: nothing more to do
        uint32_t iss = 0;     // libslirp's SYN's sequence
        uint32_t snd_nxt = 0; // past the last sequence libslirp sent
        uint32_t rcv_nxt = 0; // libslirp's last ACK to the guest
        uint32_t fin_end = 0; // its FIN's sequence + 1
        uint8_t guest_mac[6]{}, slirp_mac[6]{};
    };
    struct Forward {
        bool v6 = false;
        uint8_t host[16]{}; // all zero: any address
        uint16_t host_port = 0;
        uint8_t guest[16]{};
        uint16_t guest_port = 0;
    };

    struct Due {
        std::array<uint8_t, 96> frame{}; // Ethernet + IPv6 + TCP
        uint8_t len = 0;
        bool to_guest = false;
    };

    static Key key(const uint8_t guest[16], uint16_t guest_port, const uint8_t remote[16],
                   uint16_t remote_port);
    Flow *find(const uint8_t guest[16], uint16_t guest_port, const uint8_t remote[16],
               uint16_t remote_port);
    bool key_of(int fd, Key &out, bool &v6) const;
    // Both resets of a connection: into libslirp, and to the guest.
    void make_due(const Key &k, Flow &f);
    void push_due(const Endpoints &ep, uint32_t seq, uint32_t ack, uint8_t flags,
                  bool to_guest);

    uint8_t gateway4_[16]{}, gateway6_[16]{};
    std::vector<Forward> forwards_;
    std::unordered_map<Key, Flow, KeyHash> flows_;
    std::unordered_map<int, Key> by_fd_;
    std::vector<Due> due_;
    size_t due_next_ = 0;
    uint64_t reaped_ = 0;
};

} // namespace rknp
