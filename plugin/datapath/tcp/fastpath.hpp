// SPDX-License-Identifier: Apache-2.0

// The TCP fast path: guest TCP connections to destinations outside the
// virtual network (and to the gateway, meaning the host's loopback) bypass
// libslirp and become one host socket each (tcp_flow.hpp), with windows
// scaled both ways and 64 KiB GSO frames towards the guest. This file owns
// the flow table (4-tuple -> slot, allocated up front), the epoll set of the
// flows' sockets, their deadlines, the output batch and the entry points the
// stack loop calls. Single-threaded: everything runs on the stack thread.
//
// Use from the loop (tap with IFF_VNET_HDR only: frames carry partial
// checksums and GSO): every guest frame, after prepare_guest_frame and IPv4
// reassembly, goes to guest_frame() first and to slirp_input() only if
// NotMine; epoll_fd() joins the poll set (POLLIN) and poll_events() runs
// when it is readable; ms_until_next_timer() bounds the poll timeout and
// run_timers() runs after the poll. After each of these calls the loop
// writes frames() to the tap (one writev per frame) and clears it.
//
// Forwarded TCP ports (add_forward): the fast path owns the listening
// socket, in the same epoll set; each accepted connection becomes a flow
// that starts with a SYN to the guest (Flow::open_accepted). The guest's
// MAC, needed to address that SYN, is learnt from its frames (an ARP
// request asks for it if none came yet).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "common/fd.hpp"
#include "datapath/tcp/batch.hpp"
#include "datapath/tcp/flow.hpp"
#include "datapath/tcp/frame.hpp"
#include "datapath/tcp/reorder.hpp"
#include "datapath/tcp/timers.hpp"

namespace rknp::tcp {

enum class Verdict { NotMine, Consumed };

// What becomes of a guest SYN that would open a new flow (the parent's
// max_flows and max_new_flows_per_sec, FlowLimits).
enum class Admission {
    Accept,
    Reset, // at the cap: RST, the guest's connect fails at once
    Drop,  // rate-limited: silence, the guest retransmits
};

struct FastPathConfig {
    // The virtual networks as libslirp has them (IPv4 in host byte order).
    // Destinations inside them other than the gateway stay libslirp's.
    uint32_t net4 = 0x0a000200, mask4 = 0xffffff00;
    uint32_t gateway4 = 0x0a000202, dns4 = 0x0a000203;
    bool ipv6 = false;
    in6_addr prefix6{};
    uint32_t prefix6_len = 64;
    in6_addr gateway6{}, dns6{};
    // The gateway means the host's loopback unless this is set; then a SYN
    // to it gets an RST (as libslirp refuses it).
    bool disable_host_loopback = false;
    std::optional<uint32_t> outbound_addr; // host byte order
    std::optional<in6_addr> outbound_addr6;
    uint32_t mtu = 65520;
    // Slots of the flow table; the parent passes its effective max_flows
    // (already lowered for RLIMIT_NOFILE) and enforces the cap it shares
    // with libslirp through admit_flow.
    size_t max_flows = 16384;
    // Asked before every new flow; empty: always Accept.
    std::function<Admission()> admit_flow;
    size_t batch_data_frames = 32;    // 64 KiB of payload memory each
    size_t batch_control_frames = 32;
    // For tests: a millisecond clock instead of CLOCK_MONOTONIC, and a
    // fixed initial sequence number instead of RFC 6528's.
    std::function<int64_t()> clock;
    std::optional<uint32_t> fixed_isn;
};

// Where a guest SYN's destination goes.
enum class Route {
    NotMine,  // libslirp's (DNS, virtual network, non-unicast, v6 disabled)
    Host,     // connect to the destination itself
    Loopback, // the gateway: connect to 127.0.0.1 / ::1
    Refuse,   // the gateway with disable_host_loopback: RST
};
Route classify(const FastPathConfig &cfg, const Segment &s);

class FastPath {
public:
    // Throws Error (epoll/eventfd creation).
    explicit FastPath(FastPathConfig cfg);
    FastPath(const FastPath &) = delete;
    FastPath &operator=(const FastPath &) = delete;

    // False if the kernel lacks SO_PEEK_OFF for TCP (before Linux 6.9):
    // then every frame is NotMine and libslirp carries all TCP.
    bool enabled() const { return enabled_; }

    // A checksum-complete Ethernet frame from the guest (vnet header
    // stripped; IPv4 fragments already reassembled). NotMine: give it to
    // libslirp. Frames for the guest may be added to frames().
    Verdict guest_frame(std::span<const uint8_t> eth_frame);

    // Readable when a flow's socket has an event or postponed work waits.
    int epoll_fd() const { return ep_.get(); }
    // Services host sockets: one non-blocking epoll_wait, bounded batch.
    void poll_events();

    // Milliseconds until the next flow deadline (0 if due), -1 if none.
    int64_t ms_until_next_timer(int64_t now_ms) const;
    void run_timers(int64_t now_ms);

    // Guest-bound frames produced by the calls above; the loop writes them
    // (one writev each) and clear()s the batch after every call.
    GuestFrames &frames() { return out_; }

    // A TCP forward: listens on host (SO_REUSEADDR, IPV6_V6ONLY for IPv6,
    // like libslirp's) and sends what it accepts to guest4:guest_port
    // (host byte order). Returns 0 or the errno of the step that failed
    // (EADDRINUSE for a port in use).
    int add_forward(const sockaddr *host, socklen_t host_len, uint32_t guest4,
                    uint16_t guest_port);
    // Closes the listener of host; flows it accepted continue (as with
    // libslirp). False if there is none.
    bool remove_forward(const sockaddr *host, socklen_t host_len);
    size_t forwards() const;

    const FastPathStats &stats() const { return stats_; }
    size_t flows() const { return live_; }

private:
    // epoll data: flows have gen (30 bits) << 32 | slot; listeners the
    // tag bit and their index in fwds_; the eventfd all ones.
    static constexpr uint64_t kWakeRef = ~uint64_t(0);
    static constexpr uint64_t kListenerTag = uint64_t(1) << 62;
    static constexpr uint32_t kGenMask = 0x3fffffff;
    static constexpr int kMaxEvents = 64;
    // Connections accepted per listener and wake-up: the listener is
    // level-triggered, the rest wait for the next round.
    static constexpr int kAcceptBudget = 16;

    struct ForwardListener {
        UniqueFd fd; // invalid: free entry
        sockaddr_storage host{};
        socklen_t host_len = 0;
        uint32_t guest4 = 0;
        uint16_t guest_port = 0;
    };

    int64_t now() const;
    FlowContext ctx(int64_t now_ms) {
        return FlowContext{out_, stats_, ep_.get(), now_ms, cfg_.mtu, sndbuf_};
    }
    uint64_t hash(const uint8_t guest[16], const uint8_t remote[16],
                  uint16_t gport, uint16_t rport, bool v6) const;
    // Slot of the flow of s, or -1.
    long lookup(const Segment &s, uint64_t h) const;
    long lookup_key(const uint8_t guest[16], const uint8_t remote[16], uint16_t gport,
                    uint16_t rport, bool v6, uint64_t h) const;
    uint64_t flow_ref(uint32_t idx) const {
        return uint64_t(gen_[idx] & kGenMask) << 32 | idx;
    }
    // Whether ref (an epoll datum or a held frame's owner) still names an
    // open flow: its slot may have been freed or reused since.
    bool live(uint64_t ref) const {
        uint32_t idx = uint32_t(ref);
        return idx < flows_.size() && flow_ref(idx) == ref && !flows_[idx].closed();
    }
    // RFC 6528: a keyed hash of the 4-tuple plus a 4 us clock.
    uint32_t isn_for(uint64_t h) const;
    void insert(uint32_t idx, uint64_t h);
    void erase(uint32_t idx);
    // Bookkeeping after any call into a flow: timer, pending work, freeing.
    void after(uint32_t idx);
    // A guest segment of flow idx (live): to the flow, or held when it is
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
    void open_forwarded(const ForwardListener &l, UniqueFd sock,
                        const sockaddr_storage &peer);
    // The guest's source address as a forwarded flow shows it (libslirp's
    // sotranslate_accept): the peer's, or the gateway for loopback and
    // anything the guest could not answer.
    uint32_t forwarded_source(const sockaddr_storage &peer) const;
    void learn_guest_mac(std::span<const uint8_t> frame);
    // A flow wanted the guest's MAC: ARP for its address.
    void after_flow_call(const FlowContext &c, uint32_t idx);
    void send_arp(const uint8_t guest[16]);

    FastPathConfig cfg_;
    bool enabled_ = false;
    int sndbuf_ = 0; // FlowContext::sndbuf
    UniqueFd ep_;
    UniqueFd wake_; // eventfd in the epoll set: postponed work waits
    GuestFrames out_;
    FastPathStats stats_;
    std::vector<Flow> flows_;
    std::vector<uint32_t> gen_;    // per slot, bumped when freed
    std::vector<uint64_t> hashes_; // per slot
    std::vector<uint32_t> free_;   // free slots (stack)
    std::vector<uint32_t> index_;  // open addressing: slot + 1, 0 empty
    size_t index_mask_ = 0;
    TimerHeap timers_;
    ReorderStash reorder_{16, kTapFrameMax};
    bool replaying_ = false; // deliver() is in replay(): no nested release
    std::vector<uint32_t> pending_; // ring of slots with postponed work
    std::vector<uint8_t> queued_;   // per slot: in pending_
    size_t pending_head_ = 0, pending_count_ = 0;
    size_t live_ = 0;
    uint64_t seed_ = 0, isn_seed_ = 0;
    std::vector<ForwardListener> fwds_;
    uint8_t guest_mac_[6]{};
    bool guest_mac_known_ = false;
};

} // namespace rknp::tcp
