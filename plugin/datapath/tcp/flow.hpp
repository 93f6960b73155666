// SPDX-License-Identifier: Apache-2.0

// One fast-path TCP flow (setup, the state machine and both directions,
// all in flow.cpp): the translator between a guest TCP connection (seen
// as frames on the tap) and one non-blocking host kernel socket
// (HostSocket, host_socket.hpp, which also decides what each question to
// the socket costs), in the style of passt's tcp.c. There is no TCP stack
// here: the host kernel keeps the host->guest data in its receive queue
// until the guest ACKs it (peeked past what was sent, with SO_PEEK_OFF or
// the discard mode of peek_mode.hpp, dropped with MSG_TRUNC,
// retransmitted by peeking again from the oldest byte), and guest->host
// data goes into the socket in order, the ACK to the guest covering
// exactly what the socket accepted.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

#include "common/fd.hpp"
#include "datapath/event_source.hpp"
#include "datapath/tcp/batch.hpp"
#include "datapath/tcp/frame.hpp"
#include "datapath/tcp/host_socket.hpp"
#include "datapath/tcp/peek_mode.hpp"

namespace rknp::tcp {

// Counters of the fast path (stack thread only; the loop may copy them
// into the atomic Stats).
struct FastPathStats {
    uint64_t flows_opened = 0;
    uint64_t flows_closed = 0;
    uint64_t flows_refused = 0;   // max_flows reached or socket() failed
    uint64_t connect_failed = 0;  // connect() refused/unreachable: RST sent
    uint64_t resets_from_guest = 0;
    uint64_t resets_to_guest = 0; // on errors, timeouts, refusals
    uint64_t retransmits = 0;     // timer-driven rewinds
    uint64_t fast_retransmits = 0; // duplicate-ACK-driven rewinds
    uint64_t timeouts = 0;        // flows given up (retries)
    uint64_t segments_dropped = 0; // out of order, bad ACK, bad state
    uint64_t malformed = 0;       // TCP frames with lying lengths
    uint64_t partial_sends = 0;   // host socket took part of a segment
    uint64_t frames_lost = 0;     // control frames dropped: batch full
    uint64_t bytes_to_host = 0;
    uint64_t bytes_to_guest = 0;  // acknowledged by the guest
    // Forwarded ports (host-initiated flows).
    uint64_t forward_accepted = 0;  // connections accepted on forward listeners
    uint64_t forward_refused = 0;   // of those, closed at once (all reasons)
    uint64_t forward_full = 0;      // of those, at the forward's or all forwards' cap
    uint64_t forward_rate_limited = 0; // of those, over the forward's rate
    uint64_t forward_established = 0; // the guest answered our SYN
    uint64_t forward_syn_timeouts = 0; // the guest never answered
    uint64_t accept_paused = 0;    // accept4 out of fds/memory: listener paused
    uint64_t arp_requests = 0;     // guest MAC not known yet: asked for it
    uint64_t reorder_held = 0;     // guest segments ahead of a gap, held
    uint64_t reorder_filled = 0;   // of those, delivered once the gap filled
};

// What a flow needs from the fast path during one call.
struct FlowContext {
    GuestFrames &out;
    FastPathStats &stats;
    const EventSource &events;
    int64_t now; // ms, monotonic
    uint32_t mtu;
    PeekScratch &peek; // the peek mode and its buffers
    // The host's loopback MTU when the fast path started (0: unknown):
    // the path MTU of every connection to it, without asking TCP_INFO.
    uint32_t loopback_mtu;
    // Data frames this call may still add (push() counts them down): the
    // flow's share of the batch while other flows wait for it too, so that
    // the loop serves them in turn, not the first ones with all they hold
    // (FastPath::turn_frames); no bound otherwise. At 0 a flow with data
    // to send asks for service() (its turn in the pending ring).
    size_t data_frames = SIZE_MAX;
    // Set by a flow that has a frame for a guest whose MAC is unknown.
    bool want_guest_mac = false;
};

class Flow {
public:
    // Guest-initiated: Connecting (host connect() in progress), SynAckSent.
    // Host-initiated (a forwarded port): HostSynSent, our SYN is out.
    // Closing: the socket is gone, RSTs for the guest wait for room in
    // the output batch (service() sends them, then the flow is Free).
    enum class State : uint8_t { Free, Connecting, SynAckSent, HostSynSent, Established,
                                 Closing };

    static constexpr int kOurWs = 7;            // our windows up to 8 MiB
    static constexpr uint32_t kRtoInitialMs = 1000; // RFC 6298, before any sample
    static constexpr uint32_t kRtoMinMs = 200;      // Linux's floor: the guest
                                                    // delays ACKs up to 40 ms
    static constexpr uint32_t kRtoMaxMs = 16000;
    static constexpr uint8_t kMaxRetries = 8; // of our SYN-ACK
    // Data unacknowledged this long resets the flow: Linux's tcp_retries2
    // = 15 with a 200 ms RTO ((2^10 - 1) x 0.2 s + 6 x 120 s = 924.6 s).
    static constexpr int64_t kGiveUpMs = 924600;
    // SYNs to the guest: 1+2+4+8+16+16+16 s, about libslirp's 75 s
    // connection-establishment timer.
    static constexpr uint8_t kMaxSynRetries = 6;
    static constexpr uint8_t kDupAcks = 2; // like pasta: a tap never reorders
    static constexpr uint32_t kWndCheckMinMs = 10, kWndCheckMaxMs = 200;
    struct Open {
        const Segment *syn;
        Endpoints ep;
        const sockaddr *target;
        socklen_t target_len;
        const sockaddr *bind; // nullptr: no outbound address
        socklen_t bind_len;
        uint64_t ref; // epoll data of the socket
        uint32_t isn;
        bool loopback; // to the host's loopback (Route::Loopback)
    };
    // Starts the host side of a guest SYN. False if that failed at once;
    // the guest then got an RST and the flow stayed Free.
    bool open(FlowContext &c, const Open &o);
    // Starts a host-initiated flow on an accepted socket (a forwarded
    // port): a SYN to the guest, retransmitted with backoff until it
    // answers with a SYN-ACK. With no guest MAC yet (ep.guest_mac zero)
    // the SYN waits for guest_mac_learned() or the timer.
    void open_accepted(FlowContext &c, UniqueFd sock, const Endpoints &ep, uint64_t ref,
                       uint32_t isn);
    // The guest's MAC became known: a waiting SYN goes out now.
    void guest_mac_learned(FlowContext &c, const uint8_t mac[6]);

    void guest_segment(FlowContext &c, const Segment &s);
    void socket_events(FlowContext &c, uint32_t events);
    // Runs whatever deadline of this flow is due at c.now.
    void timer(FlowContext &c);
    // Retries what a full batch postponed.
    void service(FlowContext &c);
    // The guest is gone (its tap detached): the host side gets an RST,
    // the guest nothing; the flow is Free after.
    void guest_gone(FlowContext &c);

    bool closed() const { return v_.state == State::Free; }
    State state() const { return v_.state; }
    const Endpoints &endpoints() const { return v_.ep; }
    // Earliest deadline, or -1.
    int64_t deadline() const;
    bool wants_service() const {
        return v_.owe_synack || v_.owe_ack || v_.want_push || v_.state == State::Closing;
    }
    // Data of an established flow starting past the next byte expected
    // (within the window): guest_segment would drop it.
    bool ahead(const Segment &s) const;
    uint32_t rcv_nxt() const { return v_.rcv_nxt; }

private:
    // Plain state, reset as a whole when a slot is reused.
    struct Vars {
        State state = State::Free;
        Endpoints ep;
        uint64_t ref = 0;
        uint16_t ip_id = 0;
        // Host -> guest. snd_nxt counts data only; our FIN, once sent,
        // sits at snd_nxt.
        uint32_t iss = 0, snd_una = 0, snd_nxt = 0;
        uint32_t snd_wnd = 0;     // the guest's window, bytes
        uint16_t last_wnd_field = 0;
        uint32_t snd_high = 0;    // highest snd_max ever sent (rewinds go below)
        uint32_t fin_seq = 0;     // our FIN's sequence number, if fin_ever
        bool fin_ever = false;    // our FIN went out at least once
        uint32_t recover = 0;     // no new fast retransmit until acked beyond
        uint8_t guest_ws = 0;     // shift of the guest's windows
        uint8_t our_ws = 0;       // shift of ours (0 if the guest offered no WS)
        uint16_t mss = 536;       // of segments to the guest
        uint16_t our_mss = 536;   // advertised to the guest
        uint8_t dupacks = 0, retries = 0;
        int64_t stall_since = -1; // established: when the unacked data went out
        uint32_t rto_ms = kRtoInitialMs;
        // RTT estimate (RFC 6298), one timed segment at a time, none timed
        // across a retransmission (Karn).
        int32_t srtt_ms = -1, rttvar_ms = 0;
        bool rtt_timing = false;
        uint32_t rtt_seq = 0;
        int64_t rtt_start = 0;
        bool host_eof = false, fin_sent = false, fin_acked = false;
        // The last peek reached the end of the socket's data (or no data
        // came yet), and neither an EPOLLIN edge nor a rewind came since:
        // nothing to peek. A
        // short peek means the end, except at an urgent mark (the kernel
        // stops there even with SO_OOBINLINE): once the host sent urgent
        // data (EPOLLPRI) only EAGAIN does.
        bool peek_drained = false, host_urgent = false;
        // The host's FIN has arrived (EPOLLRDHUP/EPOLLHUP): after the data
        // still queued a peek returns 0, and no further edge will come.
        bool host_shut = false;
        // Guest -> host. rcv_nxt includes the guest's FIN once accepted.
        uint32_t irs = 0, rcv_nxt = 0;
        uint32_t adv_wnd = 0;     // last window we advertised, bytes
        bool guest_fin = false;
        bool partial = false;     // the socket refused part of a segment
        bool loopback = false;    // the host end is the host's loopback
        // Deadlines (ms, -1 unarmed).
        // No idle deadline: a half-closed flow lives as long as its host
        // socket (a guest that shut its write side may wait long for a reply).
        int64_t rto_at = -1, wnd_at = -1, keepalive_at = -1;
        uint32_t wnd_check_ms = kWndCheckMinMs;
        // Work a full batch postponed.
        bool owe_synack = false, owe_ack = false, want_push = false;
        // Closing: the RST goes to a guest in SYN-SENT; RSTs already out.
        bool rst_for_syn = false;
        uint8_t rsts_sent = 0;
    };

    void connected(FlowContext &c);
    bool send_syn(FlowContext &c);
    // The guest's SYN-ACK to our SYN: established both ways.
    void syn_answered(FlowContext &c, const Segment &s);
    void host_syn_segment(FlowContext &c, const Segment &s);
    void on_syn_rto(FlowContext &c);
    bool process_ack(FlowContext &c, const Segment &s);
    void process_data(FlowContext &c, const Segment &s);
    // Host data to the guest, as far as its window and the batch allow;
    // true if it read the socket (a read sends the ACK the host is owed).
    bool push(FlowContext &c);
    // The host's stream ended at snd_nxt: our FIN (false: no room, owed).
    bool send_host_fin(FlowContext &c);
    // A peek found nothing past the bytes in flight: our FIN if the host's
    // stream ends there, else wait for the guest's ACKs or host data.
    void nothing_past_in_flight(FlowContext &c, bool stream_ends);
    // Discard mode with bytes in flight: whether to peek now (at least as
    // much new data as skipped); else it may have sent our FIN or marked
    // the socket drained.
    bool discard_peek_worth_it(FlowContext &c, uint32_t inflight, uint32_t budget,
                               size_t room);
    bool rewind(FlowContext &c);
    void on_rto(FlowContext &c);
    void window_check(FlowContext &c, bool from_timer);
    void flush_owed(FlowContext &c);
    bool send_synack(FlowContext &c);
    bool send_ack(FlowContext &c, int copies = 1);
    bool emit(FlowContext &c, uint8_t flags, uint32_t seq, size_t payload_len,
              uint16_t window);
    // What the socket will take now (HostSocket::window).
    uint32_t window_now(bool fresh = false);
    uint32_t rto_base() const;
    void rtt_sample(int64_t ms);
    uint16_t window_field(uint32_t wnd) const;
    bool window_low() const;
    // The socket joins the epoll set (false: refused, the flow is closed).
    bool watch(FlowContext &c);
    void maybe_finish(FlowContext &c);
    // Who gets an RST when a flow closes (the host's by SO_LINGER 0);
    // None is the orderly end, both FINs exchanged.
    enum class Reset : uint8_t { None, Guest, Host, Both };
    void close(FlowContext &c, Reset reset);
    // The RSTs a closing flow owes the guest; false if the batch filled.
    bool send_rsts(FlowContext &c);
    uint32_t snd_max() const { return v_.snd_nxt + (v_.fin_sent ? 1 : 0); }
    bool in_flight() const {
        return v_.snd_nxt != v_.snd_una || (v_.fin_sent && !v_.fin_acked);
    }

    HostSocket sock_;
    Vars v_;
};

} // namespace rknp::tcp
