// SPDX-License-Identifier: Apache-2.0

// The UDP fast path: guest UDP to destinations outside the virtual network
// (the gateway meaning the host's loopback, as for TCP) bypasses libslirp.
// Each guest 4-tuple gets one connected host socket in a fixed table (the
// shared FlowTable), closed after conntrack's idle timeouts (30 s, 180 s
// once the host answered). Guest -> host: runs of equal-sized datagrams of
// one flow go out in one UDP_SEGMENT send. Host -> guest: recvmmsg with
// UDP_GRO, each datagram one frame with a partial checksum, or IP
// fragments when it is over the guest's MTU; errors the host socket
// reports (IP_RECVERR: port unreachable, ...) reach the guest as ICMP, so
// its connected sockets see ECONNREFUSED. No allocation per datagram.
// DNS to the virtual DNS address, DHCP, and everything inside the virtual
// network stay libslirp's (NotMine).
//
// Use from the loop (tap with IFF_VNET_HDR: frames carry partial
// checksums): guest frames go to guest_frame() before libslirp; after a
// batch of tap reads, flush() sends what it queued; epoll_fd() joins the
// poll set and poll_events() runs when it is readable; timers as for TCP.
// Guest-bound frames go straight to the GuestSink. Stack thread only.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "common/fd.hpp"
#include "datapath/flows/flow_table.hpp"
#include "datapath/flows/route.hpp"
#include "datapath/flows/timer_heap.hpp"
#include "datapath/guest_sink.hpp"
#include "datapath/udp/frame.hpp"

namespace rknp::udp {

struct FastPathConfig : VirtualNet {
    uint32_t mtu = 65520;
    // Slots of the flow table (the parent's effective max_flows; the cap
    // shared with TCP and libslirp is enforced through admit_flow).
    size_t max_flows = 16384;
    // Asked before every new flow; empty: always Accept.
    std::function<Admission()> admit_flow;
    // conntrack's UDP timeouts: a flow only the guest spoke on, and one
    // the host answered.
    int64_t idle_ms = 30000, idle_answered_ms = 180000;
    // UDP_SEGMENT sends and UDP_GRO reads (tests turn them off to check
    // the plain path).
    bool segmentation = true;
    // For tests: a millisecond clock instead of CLOCK_MONOTONIC.
    std::function<int64_t()> clock;
};

struct FastPathStats {
    uint64_t flows_opened = 0, flows_refused = 0, flows_expired = 0;
    uint64_t datagrams_to_host = 0, datagrams_to_guest = 0;
    uint64_t dropped_to_host = 0;  // the host socket refused them
    uint64_t segmented_sends = 0;  // UDP_SEGMENT sends (of > 1 datagram)
    uint64_t gso_frames = 0;       // guest-bound frames of > 1 datagram
    uint64_t fragmented = 0;       // guest-bound datagrams over the MTU
    uint64_t icmp_to_guest = 0;    // errors relayed
    uint64_t malformed = 0;
};

class FastPath {
public:
    // Throws Error (epoll creation).
    FastPath(FastPathConfig cfg, GuestSink &guest);
    FastPath(const FastPath &) = delete;
    FastPath &operator=(const FastPath &) = delete;

    // A checksum-complete or partial Ethernet frame from the guest (vnet
    // header stripped; IPv4 fragments reassembled). NotMine: libslirp's.
    Verdict guest_frame(std::span<const uint8_t> eth_frame);
    // Sends the datagrams guest_frame() queued (the loop calls it after
    // each batch of tap reads; a different flow or size sends them too).
    void flush();

    // Readable when a flow's socket has data or an error.
    int epoll_fd() const { return ep_.get(); }
    // Reads host sockets (bounded per flow) and writes guest frames.
    void poll_events();

    // Milliseconds until the next idle check (0 if due), -1 if none.
    int64_t ms_until_next_timer(int64_t now_ms) const;
    void run_timers(int64_t now_ms);

    // The tap went away: every flow ends.
    void tap_detached();
    // Whether the tap takes UDP GSO frames (TapIo::takes_udp_gso): then a
    // coalesced host read goes to the guest as one frame.
    void set_guest_gso(bool on) { guest_gso_ = on; }

    // The guest end (IPv4, host byte order) of a UDP forward libslirp
    // carries: datagrams from it stay libslirp's, whose forwarding socket
    // must carry the replies. Counted: two forwards may share one end.
    void keep_for_libslirp(uint32_t guest4, uint16_t guest_port);
    void release_to_fast_path(uint32_t guest4, uint16_t guest_port);

    size_t flows() const { return table_.open_flows(); }
    const FastPathStats &stats() const { return stats_; }

private:
    struct Flow {
        Endpoints ep;
        UniqueFd sock; // invalid: free slot
        int64_t last_ms = 0;
        bool answered = false;  // the host sent something back
        bool segmentation = true; // UDP_SEGMENT works towards this peer
        const Endpoints &endpoints() const { return ep; }
        bool closed() const { return !sock.valid(); }
    };
    // Guest datagrams queued for one UDP_SEGMENT send: one flow, all of
    // size seg except perhaps the last.
    struct Run {
        uint32_t idx = 0;
        size_t seg = 0, count = 0, len = 0;
    };
    // UDP_MAX_SEGMENTS is 64 on older kernels (128 on newer ones); the
    // total must fit one IPv4 datagram.
    static constexpr size_t kRunMaxSegments = 64;
    static constexpr size_t kRunMaxBytes = 65507;
    static constexpr int kMaxEvents = 64;
    static constexpr size_t kRecvBatch = 16;
    static constexpr size_t kRecvBuf = 65536;

    int64_t now() const;
    std::optional<uint32_t> open_flow(const Datagram &d, Route r, uint64_t h);
    void close_flow(uint32_t idx);
    void queue(uint32_t idx, std::span<const uint8_t> payload);
    // Sends len bytes of datagrams of size seg (one if seg >= len) on
    // flow idx; false if the socket refused them (counted).
    bool send(Flow &f, const uint8_t *data, size_t len, size_t seg);
    void receive(uint32_t idx);
    void to_guest(Flow &f, std::span<const uint8_t> payload);
    // A coalesced read: datagrams of seg bytes, the last perhaps shorter.
    void run_to_guest(Flow &f, std::span<const uint8_t> payload, size_t seg);
    void drain_errors(uint32_t idx);

    FastPathConfig cfg_;
    GuestSink &guest_;
    UniqueFd ep_;
    FlowTable<Flow> table_;
    TimerHeap timers_;
    FastPathStats stats_;
    Run run_;
    std::vector<uint8_t> run_buf_;
    std::vector<uint8_t> rx_buf_; // kRecvBatch buffers of kRecvBuf bytes
    std::array<mmsghdr, kRecvBatch> rx_msgs_{};
    std::array<iovec, kRecvBatch> rx_iov_{};
    std::array<iovec, kRecvBatch> gather_{}; // a GSO frame's payload parts
    // Room for a UDP_GRO cmsg per message.
    std::array<std::array<uint64_t, 4>, kRecvBatch> rx_ctl_{};
    std::array<uint8_t, kMaxHeaders> hdr_{};
    std::array<uint8_t, kMaxIcmpFrame> icmp_{};
    uint32_t ip_id_ = 0;
    bool guest_gso_ = false;
    struct GuestEnd {
        uint32_t addr4;
        uint16_t port;
        bool operator==(const GuestEnd &) const = default;
    };
    std::vector<GuestEnd> slirp_ends_; // keep_for_libslirp, one per forward
};

} // namespace rknp::udp
