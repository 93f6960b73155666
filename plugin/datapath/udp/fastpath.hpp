// SPDX-License-Identifier: Apache-2.0

// The UDP fast path: guest UDP to destinations outside the virtual network
// (the gateway meaning the host's loopback, as for TCP) bypasses libslirp.
// Each guest 4-tuple gets one connected host socket in a fixed table (the
// shared FlowTable), closed after conntrack's idle timeouts (30 s, 180 s
// once the host answered). Guest -> host: the first datagram of a batch
// of tap reads goes out at once, later runs of equal-sized datagrams of
// one flow in one UDP_SEGMENT send. Host -> guest: recvmmsg with
// UDP_GRO, each datagram one frame with a partial checksum, or IP
// fragments when it is over the guest's MTU; errors the host socket
// reports (IP_RECVERR: port unreachable, ...) reach the guest as ICMP, so
// its connected sockets see ECONNREFUSED. No allocation per datagram.
// DNS to the virtual DNS address, DHCP, and everything inside the virtual
// network stay libslirp's (NotMine). Forwarded ports are udp::Forwards
// (forwards.hpp), which this path owns: their events and the guest's
// replies to their clients come through here, their clients' datagrams
// go to the guest and the replies to them leave in this path's runs.
//
// Use from the loop (tap with IFF_VNET_HDR: frames carry partial
// checksums): guest frames go to guest_frame() before libslirp; after a
// batch of tap reads, end_of_input() sends what it queued; its sockets
// are in the loop's shared epoll set (cfg.shared_epoll_fd) and
// handle_events() gets their events of the round (alone, epoll_fd() is
// its own set and poll_events() serves it); timers as for TCP.
// Guest-bound frames go straight to the GuestSink. Stack thread only.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/fd.hpp"
#include "datapath/event_source.hpp"
#include "datapath/flows/flow_table.hpp"
#include "datapath/flows/route.hpp"
#include "datapath/path.hpp"
#include "datapath/flows/timer_heap.hpp"
#include "datapath/guest_sink.hpp"
#include "datapath/udp/fastpath_config.hpp"
#include "datapath/udp/flow.hpp"
#include "datapath/udp/forwards.hpp"
#include "datapath/udp/frame.hpp"
#include "datapath/udp/read_buffers.hpp"

namespace rknp::udp {

class FastPath final : public Path, private Forwards::Carrier {
public:
    // Throws Error (epoll creation).
    FastPath(FastPathConfig cfg, GuestSink &guest);
    FastPath(const FastPath &) = delete;
    FastPath &operator=(const FastPath &) = delete;

    // A checksum-complete or partial Ethernet frame from the guest (vnet
    // header stripped; IP fragments reassembled). NotMine: libslirp's.
    // The guest's ICMP port unreachable about a flow's datagram ends that
    // flow (Consumed).
    Verdict guest_frame(std::span<const uint8_t> eth_frame) override;
    // A reply from an address routed behind the guest: a datagram to a
    // client of a forward to it, else NotMine.
    Verdict routed_frame(std::span<const uint8_t> eth_frame) override;
    const char *name() const override { return "UDP fast path"; }
    Traits traits() const override { return {.needs_vnet_hdr = true}; }
    // Sends the datagrams guest_frame() queued (a different flow or size
    // sends them too).
    void flush();
    // The loop calls it after each batch of tap reads: flush(), and the
    // next batch's first datagram goes out at once, without waiting for
    // the tap read that tells whether more follow (a request waits for
    // nothing and needs no copy); later ones of a batch may form runs.
    void end_of_input() override {
        flush();
        first_of_reads_sent_ = false;
    }

    // Readable when a flow's socket has data or an error (the shared set
    // when cfg.shared_epoll_fd was given).
    int epoll_fd() const { return events_.fd(); }
    // With a set of its own: one non-blocking epoll_wait, then
    // handle_events() in burst mode.
    void poll_events();
    // This source's events: reads host sockets and writes guest frames.
    // burst: the source had events the round before too, so each ready
    // flow gets one batch of reads; otherwise the wake-up is most likely
    // for one datagram (an answer): one read each, and the set,
    // level-triggered, says next round whether more came.
    void handle_events(std::span<const epoll_event> evs, bool burst) override;
    std::optional<EventOwner> event_owner() const override { return EventOwner::Udp; }

    // Milliseconds until the next idle check (0 if due), -1 if none.
    int64_t ms_until_next_timer(int64_t now_ms) const override;
    void run_timers(int64_t now_ms) override;

    // The tap went away: every flow ends.
    void tap_detached() override;
    // Whether the tap takes UDP GSO frames (TapIo::takes_udp_gso): then a
    // coalesced host read goes to the guest as one frame.
    void set_guest_gso(bool on) { guest_gso_ = on; }
    // A tap with vnet headers is asked that once.
    std::string tap_attached(TapIo &tap) override;

    // Forwarded ports (Forwards::add, remove: a host socket each, its
    // clients flows towards guest:guest_port in a pool of their own), to
    // guest4:guest_port (IPv4, host byte order) or to guest (IPv4-mapped,
    // or IPv6 with v6: 1.7). 0 or an errno (EADDRINUSE); false: no such
    // forward.
    int add_forward(const sockaddr *host, socklen_t host_len, uint32_t guest4,
                    uint16_t guest_port);
    int add_forward(const sockaddr *host, socklen_t host_len, const uint8_t guest[16],
                    bool v6, uint16_t guest_port);
    bool remove_forward(const sockaddr *host, socklen_t host_len) {
        return forwards_.remove(host, host_len);
    }
    size_t forwards() const { return forwards_.forwards(); }
    // The same through the Path interface: UDP forwards; one a later path
    // (libslirp) carries keeps its guest end there.
    bool carries(const ForwardSpec &f) const override { return f.udp; }
    void add_forward(const ForwardSpec &f) override { add_socket_forward(*this, f); }
    void remove_forward(const ForwardSpec &f) override { remove_socket_forward(*this, f); }
    void forward_behind(const ForwardSpec &f, bool taken) override;

    // The guest end (IPv4, host byte order) of a UDP forward libslirp
    // carries (it moved there for a tap without vnet headers, which a tap
    // with them may follow): datagrams from it stay libslirp's, whose
    // forwarding socket must carry the replies; flows the guest opened
    // from it before are closed. Counted: two forwards may
    // share one end.
    void keep_for_libslirp(uint32_t guest4, uint16_t guest_port);
    void release_to_fast_path(uint32_t guest4, uint16_t guest_port);

    // The guest's flows (what FlowLimits counts), and the forwards' clients.
    size_t flows() const override { return table_.open_flows(); }
    size_t lingering_flows() const override { return flows(); }
    size_t forward_flows() const { return forwards_.clients(); }
    void publish(Stats &s) const override;
    const FastPathStats &stats() const { return stats_; }

private:
    // Guest datagrams queued for one UDP_SEGMENT send: one flow, all of
    // size seg except perhaps the last.
    struct Run {
        Flow *flow = nullptr; // a guest flow's or a forward's client's: never moves
        size_t seg = 0, count = 0, len = 0;
    };
    // UDP_MAX_SEGMENTS is 64 on older kernels (128 on newer ones); the
    // total must fit one IPv4 datagram.
    static constexpr size_t kRunMaxSegments = 64;
    static constexpr size_t kRunMaxBytes = 65507;
    static constexpr int kMaxEvents = 64;
    // epoll data (below EventSource's owner bits): flows have
    // FlowTable::ref (generation << 32 | slot, the generation 29 bits),
    // forwards Forwards::kEventTag and their index.
    static constexpr size_t kRecvBatch = ReadBuffers::kBatch;

    int64_t now() const { return clock_ms(cfg_); }
    std::optional<uint32_t> open_flow(const Datagram &d, Route r, uint64_t h);
    // A destination a flow could not connect to, kUnreachableMs long: its
    // datagrams are answered from here, without an admission token and
    // the system calls of another try (Happy Eyeballs tries the next
    // address at once).
    struct Unreachable {
        uint8_t addr[16]{};
        bool v6 = false;
        IcmpError icmp;
        int64_t until = -1;
    };
    static constexpr size_t kUnreachableSlots = 64; // direct-mapped, keyed
    static constexpr int64_t kUnreachableMs = 1000;
    Unreachable &unreachable_slot(const Datagram &d);
    // ICMP e to the guest about d, from the gateway (a router's answer).
    void tell_unreachable(const Datagram &d, const IcmpError &e);
    // The guest's port unreachable about the datagram q (as it went to
    // the guest): closes its flow; false if none is ours.
    bool guest_port_unreachable(const Datagram &q);
    void close_flow(uint32_t idx);
    // Forwards::Carrier: a run queued for f leaves before f closes.
    void closing(const Flow &f) override {
        if (run_.count != 0 && run_.flow == &f) flush();
    }
    void queue(Flow &f, std::span<const uint8_t> payload);
    // Sends len bytes of datagrams of size seg (one if seg >= len) on
    // flow idx; false if the socket refused them (counted).
    bool send(Flow &f, const uint8_t *data, size_t len, size_t seg);
    // One read of up to batch datagrams (kRecvBatch at most).
    void receive(uint32_t idx, size_t batch);
    void to_guest(Flow &f, std::span<const uint8_t> payload);
    // A coalesced read: datagrams of seg bytes, the last perhaps shorter
    // (an empty payload: one empty datagram); Forwards::Carrier's too.
    void run_to_guest(Flow &f, std::span<const uint8_t> payload, size_t seg) override;
    void drain_errors(uint32_t idx);
    // The socket's pending error (SO_ERROR), which nothing queued stands
    // for: cleared, and the guest told what it means.
    void take_socket_error(Flow &f);
    // An error an earlier ICMP message left on a connected socket: it fails
    // one call, and the error queue tells the guest about it.
    static bool icmp_left_error(int err);
    // A send error that means "try later" (a full buffer): anything else
    // may be one an ICMP message left, gone after the call it failed.
    static bool send_would_block(int err) {
        return err == EAGAIN || err == EWOULDBLOCK || err == ENOBUFS;
    }
    int flow_fd(const Flow &f) const {
        return f.fwd >= 0 ? forwards_.socket_of(f) : f.sock.get();
    }

    FastPathConfig cfg_;
    GuestSink &guest_;
    EventSource events_;
    FlowTable<Flow> table_; // the guest's flows
    TimerHeap timers_;
    uint64_t port_seed_;    // unreachable_slot's key, and the forwards' port draws
    FastPathStats stats_;
    Run run_;
    std::vector<uint8_t> run_buf_;
    bool first_of_reads_sent_ = false; // end_of_input() clears it
    ReadBuffers rx_;                   // the forwards' reads too
    std::array<iovec, kRecvBatch> gather_{}; // a GSO frame's payload parts
    std::array<uint8_t, kMaxHeaders> hdr_{};
    std::array<uint8_t, kMaxIcmpFrame> icmp_{};
    uint32_t ip_id_ = 0;
    bool guest_gso_ = false;
    std::array<Unreachable, kUnreachableSlots> unreachable_{};
    struct GuestEnd {
        uint32_t addr4;
        uint16_t port;
        bool operator==(const GuestEnd &) const = default;
    };
    std::vector<GuestEnd> slirp_ends_; // keep_for_libslirp, one per forward
    // Last: it holds references to the members above, and its sockets
    // leave the epoll set before events_ goes.
    Forwards forwards_;
};

} // namespace rknp::udp
