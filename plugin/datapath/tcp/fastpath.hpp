// SPDX-License-Identifier: Apache-2.0

// The TCP fast path: guest TCP connections to destinations outside the
// virtual network (and to the gateway, meaning the host's loopback) bypass
// libslirp and become one host socket each (flow.hpp), with windows
// scaled both ways and 64 KiB GSO frames towards the guest. FastPath owns
// the flow table, the epoll set of the flows' sockets, their deadlines, the
// output batch and the entry points the stack loop calls. Single-threaded:
// everything runs on the stack thread.
//
// Use from the loop (tap with IFF_VNET_HDR only: frames carry partial
// checksums and GSO): every guest frame, after prepare_guest_frame and IPv4
// reassembly, goes to guest_frame() first and to slirp_input() only if
// NotMine; its sockets are in the loop's shared epoll set
// (cfg.shared_epoll_fd) and handle_events() gets their events of the round
// (alone, epoll_fd() is its own set and poll_events() serves it);
// ms_until_next_timer() bounds the poll timeout and
// run_timers() runs after the poll. After each of these calls the loop
// writes frames() to the tap (one writev per frame) and clears it.
//
// Parts: the flow table (flow_table.hpp), routing of guest SYNs
// (route.hpp), the forward listeners (forward_listeners.cpp), the peek mode
// and its scratch (peek_mode.hpp) and, here, the epoll dispatch, deadlines
// and guest frames.
//
// Forwarded TCP ports (add_forward): the fast path owns the listening
// socket, in the same epoll set; each accepted connection becomes a flow
// that starts with a SYN to the guest (Flow::open_accepted), in table
// slots beyond the guest's, never admitted or counted as the guest's
// (fastpath_config.hpp: a cap and a rate per forward). The guest's MAC,
// needed to address that SYN, is learnt from its frames (an ARP request
// asks for it if none came yet).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/fd.hpp"
#include "datapath/tcp/batch.hpp"
#include "datapath/tcp/fastpath_config.hpp"
#include "datapath/tcp/flow.hpp"
#include "datapath/flows/flow_table.hpp"
#include "datapath/flows/token_bucket.hpp"
#include "datapath/tcp/frame.hpp"
#include "datapath/tcp/peek_mode.hpp"
#include "datapath/tcp/reorder.hpp"
#include "datapath/flows/route.hpp"
#include "datapath/path.hpp"
#include "datapath/flows/timer_heap.hpp"

namespace rknp::tcp {

class FastPath final : public Path {
public:
    // Throws Error (epoll/eventfd creation; RKNP_ERR_UNSUPPORTED for
    // PeekMode::Offset on a kernel without SO_PEEK_OFF for TCP).
    explicit FastPath(FastPathConfig cfg);
    FastPath(const FastPath &) = delete;
    FastPath &operator=(const FastPath &) = delete;

    // How host sockets are peeked (Offset or Discard, never Automatic),
    // and why (for the start log line).
    PeekMode peek_mode() const { return peek_choice_.mode; }
    const char *peek_mode_reason() const { return peek_choice_.reason; }

    // A checksum-complete Ethernet frame from the guest (vnet header
    // stripped; IPv4 fragments already reassembled). NotMine: give it to
    // libslirp. Frames for the guest may be added to frames().
    Verdict guest_frame(std::span<const uint8_t> eth_frame) override;
    // A reply from an address routed behind the guest: a segment of a
    // connection accepted on a forward to it, else NotMine.
    Verdict routed_frame(std::span<const uint8_t> eth_frame) override;
    const char *name() const override { return "TCP fast path"; }
    Traits traits() const override { return {.needs_vnet_hdr = true}; }

    // Readable when a flow's socket has an event or postponed work waits
    // (the shared set when cfg.shared_epoll_fd was given).
    int epoll_fd() const { return events_.fd(); }
    // With a set of its own: one non-blocking epoll_wait, then
    // handle_events().
    void poll_events();
    // This source's events from the set (the loop's share of a shared
    // wait).
    void handle_events(std::span<const epoll_event> evs, bool burst) override;
    std::optional<EventOwner> event_owner() const override { return EventOwner::Tcp; }

    // Milliseconds until the next flow deadline (0 if due), -1 if none.
    int64_t ms_until_next_timer(int64_t now_ms) const override;
    void run_timers(int64_t now_ms) override;

    // Guest-bound frames produced by the calls above: written to
    // cfg.guest at the end of each call (one writev each, the payload
    // where it was peeked into), or kept here without one, for the
    // caller to read and clear().
    GuestFrames &frames() { return out_; }

    // A TCP forward: listens on host (SO_REUSEADDR, IPV6_V6ONLY for IPv6,
    // like libslirp's) and sends what it accepts to guest:guest_port
    // (IPv4-mapped, or IPv6 with v6; the guest's network or routed behind
    // it). Returns 0 or the errno of the step that failed (EADDRINUSE for
    // a port in use).
    // handoff: RKNP_FORWARD_HANDOFF_LOOPBACK's socket, or null: each
    // connection from a loopback client goes there (hand_off) instead of
    // to the guest.
    int add_forward(const sockaddr *host, socklen_t host_len, const uint8_t guest[16],
                    bool v6, uint16_t guest_port,
                    std::shared_ptr<const UniqueFd> handoff = {});
    // The same to guest4 (host byte order).
    int add_forward(const sockaddr *host, socklen_t host_len, uint32_t guest4,
                    uint16_t guest_port);
    // Closes the listener of host; flows it accepted continue (as with
    // libslirp). False if there is none.
    bool remove_forward(const sockaddr *host, socklen_t host_len);
    size_t forwards() const;
    // The same through the Path interface: TCP forwards.
    bool carries(const ForwardSpec &f) const override { return !f.udp; }
    void add_forward(const ForwardSpec &f) override;
    void remove_forward(const ForwardSpec &f) override { remove_socket_forward(*this, f); }

    // The tap went away (the stack loop's detach path): no guest to talk
    // to, so every flow ends at once, its host peer reset, and no frame
    // waits for it. Listeners stay; the guest's MAC is learnt anew.
    void tap_detached() override;

    const FastPathStats &stats() const { return stats_; }
    // Data frames a flow's turn gives it while other flows wait (turn_frames).
    static constexpr size_t kShareFrames = 2;
    // The guest's flows (what FlowLimits counts), and the connections
    // accepted on forwards.
    size_t flows() const override { return table_.open_flows() - forwarded_open_; }
    size_t forward_flows() const { return forwarded_open_; }
    void publish(Stats &s) const override;

private:
    // epoll data (below EventSource's owner bits): flows have
    // FlowTable::ref (generation << 32 | slot); listeners the tag bit and
    // their index in fwds_; the eventfd all ones.
    static constexpr uint64_t kWakeRef = EventSource::kRefMask;
    static constexpr uint64_t kListenerTag = uint64_t(1) << 61;
    static constexpr int kMaxEvents = 64;
    // Connections accepted per listener and wake-up: the listener is
    // level-triggered, the rest wait for the next round.
    static constexpr int kAcceptBudget = 16;
    // A listener whose accept4 ran out of fds or memory leaves the epoll
    // set this long (level-triggered, it would wake the loop at once).
    static constexpr int64_t kAcceptPauseMs = 100;

    struct ForwardListener {
        UniqueFd fd; // invalid: free entry
        sockaddr_storage host{};
        socklen_t host_len = 0;
        uint8_t guest[16]{}; // IPv4-mapped unless v6
        bool v6 = false;
        uint16_t guest_port = 0;
        bool paused = false; // out of the epoll set until listeners_resume_at_
        size_t live = 0;     // its open connections
        TokenBucket bucket{1, 0}; // its new connections (reset by add_forward)
        std::shared_ptr<const UniqueFd> handoff; // loopback clients go there
    };
    // fwd_of_ of a slot: the guest's flow, or a connection whose forward
    // is gone (still counted in forwarded_open_); else a listener's index.
    static constexpr int32_t kGuestFlow = -1, kForwardGone = -2;

    FastPath(FastPathConfig cfg, std::array<uint64_t, 2> seeds);
    int64_t now() const;
    // The batch to cfg_.guest (when there is one), at the end of every
    // public call that may fill it.
    void flush_to_guest();
    struct FlushOnReturn {
        FastPath &path;
        ~FlushOnReturn() { path.flush_to_guest(); }
    };
    FlowContext ctx(int64_t now_ms, size_t data_frames = SIZE_MAX) {
        return FlowContext{out_,   stats_, events_, now_ms, cfg_.mtu, peek_, loopback_mtu_,
                           data_frames};
    }
    // The guest-bound batch is shared out round-robin while flows wait for
    // it: a flow called on for a host event or a guest ACK takes all the
    // room it finds when none waits (a lone bulk flow fills the batch as
    // before), else a host event puts it at the back of the pending ring
    // (turn_frames 0) and an ACK gives it kShareFrames first; the ring's
    // turns give kShareFrames each and put a flow that has more back at
    // the tail (service_pending goes round while the batch has room).
    // Before, each flow took all it could in its turn: when the loop could
    // not keep up (100 downloads on a busy machine) a flow's share followed
    // the bytes its host socket held, so the flows whose buffers the kernel
    // had grown first kept the larger share (issue 38: Jain's index
    // 0.79-0.92 where the host kernel has 1.00).
    static size_t turn_frames(bool others_wait) { return others_wait ? 0 : SIZE_MAX; }
    // RFC 6528: a keyed hash of the 4-tuple plus a 4 us clock.
    uint32_t isn_for(uint64_t h) const;
    // Bookkeeping after every call into flow idx: an ARP if it wanted the
    // guest's MAC, then its deadline and postponed work, or its slot
    // freed if it closed.
    void settle(const FlowContext &c, uint32_t idx);
    // A guest segment of flow idx (open): to the flow, or held when it is
    // ahead of a gap (ReorderStash); then held ones the gap no longer
    // separates.
    void deliver(uint32_t idx, const Segment &s, std::span<const uint8_t> frame);
    // A held frame to its flow (if still there) as it arrived; frees the slot.
    void replay(size_t slot);
    void open_flow(const Segment &s, Route r);
    void reply_rst(const Segment &s);
    void service_pending();
    void wake();
    void accept_forward(size_t slot);
    void pause_listener(size_t slot);
    void resume_listeners();
    void open_forwarded(size_t slot, UniqueFd sock, const sockaddr_storage &peer);
    // A loopback client's connection to the caller through the forward's
    // handoff socket (RKNP_FORWARD_HANDOFF_LOOPBACK), or reset if the
    // message cannot go at once.
    void hand_off(size_t slot, UniqueFd sock);
    // The guest's source address as a forwarded flow shows it (libslirp's
    // sotranslate_accept): the peer's, or the gateway for loopback and
    // anything the guest could not answer.
    uint32_t forwarded_source(const sockaddr_storage &peer) const;
    void learn_guest_mac(std::span<const uint8_t> frame);
    void send_arp(const uint8_t guest[16], bool v6);

    FastPathConfig cfg_;
    PeekChoice peek_choice_;
    PeekScratch peek_;
    GuestFrames out_;
    FastPathStats stats_;
    FlowTable<Flow> table_;
    TimerHeap timers_;
    ReorderStash reorder_{16, kTapFrameMax};
    bool replaying_ = false; // deliver() is in replay(): no nested release
    std::vector<uint32_t> pending_; // ring of slots with postponed work
    std::vector<uint8_t> queued_;   // per slot: in pending_
    size_t pending_head_ = 0, pending_count_ = 0;
    uint64_t isn_seed_ = 0;
    uint32_t loopback_mtu_ = 0; // read once at start (Flow::connected)
    EventSource events_;
    UniqueFd wake_; // eventfd in the epoll set: postponed work waits
    std::vector<ForwardListener> fwds_;
    std::vector<int32_t> fwd_of_; // per slot: kGuestFlow, kForwardGone or a listener
    size_t forwarded_open_ = 0;   // slots of connections accepted on forwards
    int64_t listeners_resume_at_ = -1; // ms; -1: none paused
    uint8_t guest_mac_[6]{};
    bool guest_mac_known_ = false;
};

} // namespace rknp::tcp
