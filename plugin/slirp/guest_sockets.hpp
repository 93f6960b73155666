// SPDX-License-Identifier: Apache-2.0

// The host sockets libslirp holds for guest flows, known exactly without
// reading libslirp's private socket lists. libslirp 4.7.0 announces every
// socket it polls through SlirpCb register_poll_fd / unregister_poll_fd:
//   register   tcp_fconnect (guest SYN), udp_attach (first datagram of a
//              guest (address, port)), icmp_send (guest echo request), all
//              inside slirp_input; tcp_connect (a forward's accepted
//              connection) inside slirp_pollfds_poll. Forward listeners
//              (tcp_listen, udp_listen) are never registered.
//   unregister tcp_close, udp_detach (after 240 s idle, 10 s for DNS),
//              icmp_detach, slirp_remove_hostfwd, slirp_cleanup.
// So a socket registered while the stack loop is inside slirp_input was
// created for the frame being input: that is a guest socket, and the frame
// says which flow it belongs to. Sockets registered elsewhere (forwards)
// are not guest flows and are not tracked. An unregister removes the
// entry whatever created it, so expiry is libslirp's own, never guessed.
//
// Entries live in a fixed array (capacity given at construction, never
// grown); two open-addressing indexes with linear probing and
// backward-shift deletion (no tombstones, so probe chains never rot) find
// an entry by fd (unregister) and by flow key (does libslirp already have
// a socket for this UDP source or TCP 4-tuple?). The key hash is seeded
// at random: the guest picks the keys and must not pile them into one
// chain. Nothing allocates after construction. Stack thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rknp {

// A guest flow as libslirp looks its sockets up: TCP by 4-tuple; UDP by
// the guest's (address, port) alone (udp_input's solookup passes no
// foreign address), so dst and dport are zero for UDP. IPv4 addresses are
// IPv4-mapped IPv6. proto 0: a flow with no key (ICMP echo: every request
// gets a socket of its own).
struct FlowKey {
    uint8_t proto = 0; // IPPROTO_TCP, IPPROTO_UDP or 0
    uint8_t src[16]{};
    uint8_t dst[16]{};
    uint16_t sport = 0, dport = 0;

    bool operator==(const FlowKey &) const = default;
};

class GuestSockets {
public:
    explicit GuestSockets(size_t capacity);
    GuestSockets(const GuestSockets &) = delete;
    GuestSockets &operator=(const GuestSockets &) = delete;

    size_t size() const { return live_; }
    // Of those, the ones that are not TCP (UDP, ICMP, unclassified): only
    // libslirp's idle timer ends them, the guest cannot.
    size_t lingering() const { return lingering_; }
    size_t capacity() const { return entries_.size(); }
    // Whether libslirp holds a socket for this keyed flow.
    bool contains(const FlowKey &k) const;

    // Brackets one slirp_input call: sockets registered in between belong
    // to the guest flow key (proto 0: no key).
    void begin_input(const FlowKey &key);
    void end_input() { in_input_ = false; }

    // From SlirpCb. fd < 0 is ignored (udp_attach announces a failed
    // socket too). A registration outside begin/end_input is a forward's.
    // Re-registering a tracked fd replaces its entry: libslirp 4.7.0 closes
    // an ICMP socket whose outbound bind failed without unregistering it,
    // and the kernel may hand the number out again.
    void on_register(int fd);
    void on_unregister(int fd);

private:
    struct Entry {
        int fd = -1;
        FlowKey key;
    };
    // An index holds entry number + 1; 0 is empty.
    using Index = std::vector<uint32_t>;

    size_t home_by_fd(int fd) const;
    size_t home_by_key(const FlowKey &k) const;
    long find_fd(int fd) const; // entry number or -1
    void index_insert(Index &ix, size_t home, uint32_t entry);
    template <class Home> void index_erase(Index &ix, uint32_t entry, Home home);
    void erase_entry(uint32_t e);

    std::vector<Entry> entries_;
    std::vector<uint32_t> free_; // entry numbers, a stack
    Index by_fd_, by_key_;
    size_t mask_ = 0;
    size_t live_ = 0;
    size_t lingering_ = 0;
    uint64_t seed_ = 0;
    bool in_input_ = false;
    FlowKey input_key_;
};

} // namespace rknp
