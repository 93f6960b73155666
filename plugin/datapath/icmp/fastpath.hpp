// SPDX-License-Identifier: Apache-2.0

// The ICMP echo path: guest echo requests (ping from the container) to
// destinations outside the virtual network, and to the gateway meaning the
// host's loopback, go out on unprivileged ICMP ("ping") sockets instead of
// through libslirp; their replies come back as guest-bound frames. One
// socket per (guest address, echo id, destination), in a fixed-size table
// (echo_table.hpp); the kernel gives each socket its own echo id, which
// the replies carry and which is mapped back to the guest's. Entries idle
// for EchoConfig::idle_timeout_ms are closed; new ones are admitted
// through EchoConfig::admit_entry (the parent's flow limits).
//
// At construction the path probes whether the kernel lets this process
// open ping sockets (probe.hpp); where it does not, enabled() is false and
// every echo request stays libslirp's. Single-threaded: everything runs on
// the stack thread. Use from the loop: every guest frame that is neither
// the TCP fast path's nor dropped goes to guest_frame() before libslirp;
// its sockets are in the loop's shared epoll set (cfg.shared_epoll_fd) and
// handle_events() gets their events of the round (alone, epoll_fd() is its
// own set and poll_events() serves it); ms_until_next_timer() bounds the
// poll timeout and run_timers() runs after the poll. Replies go straight to the GuestSink (the tap,
// with or without vnet headers).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/fd.hpp"
#include "datapath/event_source.hpp"
#include "datapath/guest_sink.hpp"
#include "datapath/icmp/echo_config.hpp"
#include "datapath/icmp/echo_frame.hpp"
#include "datapath/icmp/echo_table.hpp"
#include "datapath/icmp/probe.hpp"
#include "datapath/path.hpp"

namespace rknp::icmp {

struct EchoStats {
    uint64_t requests = 0;        // sent on a ping socket
    uint64_t replies = 0;         // frames of replies written to the guest
    uint64_t malformed = 0;       // guest requests dropped as Malformed
    uint64_t refused = 0;         // new entries refused: full table, limits
    uint64_t socket_errors = 0;   // socket, bind, send or receive failures
    uint64_t replies_dropped = 0; // not from the pinged host, or too long
    uint64_t unreachable = 0;     // errors sent for requests sendto refused
    uint64_t opened = 0, expired = 0;
};

// guest_frame's Verdict: NotMine is libslirp's; Consumed: sent on, or
// refused (counted in EchoStats); Malformed: an echo request that lies
// about itself, dropped.
class FastPath final : public Path {
public:
    // Throws Error when the epoll instance cannot be made.
    FastPath(EchoConfig cfg, GuestSink &sink);
    FastPath(const FastPath &) = delete;
    FastPath &operator=(const FastPath &) = delete;

    // Whether ping sockets are allowed (IPv4; IPv6 may still be refused),
    // and the log line that says which path carries echo requests.
    bool enabled() const { return probe_.v4; }
    const PingProbe &probe() const { return probe_; }
    std::string description() const { return describe(probe_); }

    // Readable when a reply waits (the shared set when
    // cfg.shared_epoll_fd was given).
    int epoll_fd() const { return events_.fd(); }
    size_t flows() const override { return table_.open(); }
    size_t lingering_flows() const override { return flows(); }
    const EchoStats &stats() const { return stats_; }

    // A guest Ethernet frame (no vnet header, IPv4 reassembled).
    Verdict guest_frame(std::span<const uint8_t> frame) override;
    const char *name() const override { return "ICMP echo path"; }
    Traits traits() const override { return {.needs_checksum = true}; }
    // With a set of its own: replies waiting on the ping sockets, to the
    // guest (one non-blocking epoll_wait, then handle_events()).
    void poll_events();
    // This source's events from the set.
    void handle_events(std::span<const epoll_event> evs, bool burst) override;
    std::optional<EventOwner> event_owner() const override { return EventOwner::Echo; }
    // Milliseconds until run_timers has work (0: now; -1: none).
    int64_t ms_until_next_timer(int64_t now_ms) const override;
    // Closes idle entries.
    void run_timers(int64_t now_ms) override;
    // Entries need no guest to end: they expire on their own.
    void tap_detached() override {}

private:
    int64_t now() const;
    // The socket address the entry's requests go to.
    socklen_t target(const Entry &e, sockaddr_storage &ss) const;
    // A new entry with its socket, or nothing (counted).
    std::optional<uint32_t> open_entry(const EchoRequest &r, bool loopback);
    void drain(uint32_t idx);

    EchoConfig cfg_;
    GuestSink &sink_;
    PingProbe probe_;
    EchoTable table_;
    EventSource events_;
    std::vector<uint8_t> rx_; // kHeadroom + kMaxMessage
    EchoStats stats_;
    uint16_t ip_id_ = 0;
    int64_t next_scan_ms_ = 0;
};

} // namespace rknp::icmp
