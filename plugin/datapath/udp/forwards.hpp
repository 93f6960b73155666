// SPDX-License-Identifier: Apache-2.0

// The UDP fast path's forwarded ports (udp::Forwards): published UDP
// ports, one host socket per forward in the fast path's epoll set, each
// client address sending to it a flow towards the forward's guest end in
// the forwards' own pool (ClientPool, client_pool.hpp: never the guest's
// table or admission), the guest's replies leaving through that socket,
// from the address the client sent to. With them the guest's MAC, which
// a client's flow needs before the guest ever sent it anything: learned
// from the guest's frames, asked for with ARP.
//
// udp::FastPath owns it and lends it what it needs, no more: the settings
// and counters, the epoll set, the read buffers, the guest's flow table
// (read only: a client must not take a 4-tuple one of the guest's flows
// has) and a Carrier, through which a client's datagrams reach the guest
// and a run of guest datagrams queued for a client leaves before the
// client closes. The replies themselves go out with the fast path's runs
// (FastPath::flush), on socket_of() the client's forward. Stack thread
// only.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/fd.hpp"
#include "datapath/event_source.hpp"
#include "datapath/flows/flow_table.hpp"
#include "datapath/guest_sink.hpp"
#include "datapath/udp/client_pool.hpp"
#include "datapath/udp/fastpath_config.hpp"
#include "datapath/udp/flow.hpp"
#include "datapath/udp/frame.hpp"
#include "datapath/udp/read_buffers.hpp"

namespace rknp::udp {

class Forwards {
public:
    // epoll data of a forward's socket: this bit and its index (below
    // EventSource's owner bits; a guest flow's FlowTable::ref, its
    // generation 29 bits, stays below it).
    static constexpr uint64_t kEventTag = uint64_t(1) << 61;

    // What the forwards use of the fast path that carries their flows.
    class Carrier {
    public:
        // A client's read to the guest on its flow: datagrams of seg bytes,
        // the last perhaps shorter; an empty payload is one empty datagram.
        virtual void run_to_guest(Flow &f, std::span<const uint8_t> payload, size_t seg) = 0;
        // f is about to close: guest datagrams queued for it leave first.
        virtual void closing(const Flow &f) = 0;

    protected:
        ~Carrier() = default;
    };

    // All references outlive this object (FastPath's members); port_seed
    // keys the draws of a client's port towards the guest.
    Forwards(const FastPathConfig &cfg, const EventSource &events, GuestSink &guest,
             const FlowTable<Flow> &guest_flows, ReadBuffers &rx, FastPathStats &stats,
             Carrier &carrier, uint64_t port_seed);
    Forwards(const Forwards &) = delete;
    Forwards &operator=(const Forwards &) = delete;

    // A forward to guest:guest_port (IPv4-mapped unless v6): a host socket
    // bound to host (IPv6 ones IPV6_V6ONLY; no SO_REUSEADDR, which for UDP
    // would let another socket share the port) in the epoll set. Each
    // client address sending to it opens a flow in the pool from the
    // client as the guest sees it (forwarded_source; its own port unless
    // that 4-tuple is taken) to guest:guest_port; the guest's replies
    // leave through the forward's socket with sendmsg to the client. 0 or
    // an errno (EADDRINUSE).
    int add(const sockaddr *host, socklen_t host_len, const uint8_t guest[16], bool v6,
            uint16_t guest_port);
    // Closes the forward's socket and its flows (as libslirp, whose one
    // socket carries them all). False: no such forward.
    bool remove(const sockaddr *host, socklen_t host_len);
    size_t forwards() const;
    size_t clients() const { return clients_.size(); }

    // The socket a client's replies leave through (f.fwd >= 0).
    int socket_of(const Flow &f) const { return fwds_[size_t(f.fwd)].fd.get(); }

    // Reads forward slot's socket (ref & ~kEventTag of its event; one
    // recvmmsg batch: level-triggered) and sends the guest its clients'
    // datagrams.
    void receive(size_t slot);
    // The client the guest's datagram d (IPv4, or IPv6 for an IPv6 guest
    // end) answers, marked answered; nullptr: none. Inline: every guest
    // datagram asks (a pool without clients answers at once).
    Flow *answered(const Datagram &d) {
        const std::optional<uint32_t> c =
            clients_.find_guest_side(d.src, d.dst, d.sport, d.dport);
        if (!c) return nullptr;
        clients_.answered(*c, clock_ms(cfg_));
        return &clients_[*c];
    }
    // The guest's port unreachable about the datagram q (as it went to the
    // guest): closes its client's flow (counted); false if none is ours.
    bool guest_port_unreachable(const Datagram &q);

    // Learned from every guest frame (a guest flow has it from its own).
    void learn_guest_mac(std::span<const uint8_t> frame);

    // The earliest time a client goes idle, -1 if none; run_timers closes
    // those idle at now_ms (counted as expired flows).
    int64_t next_expiry() const;
    void run_timers(int64_t now_ms);
    // The tap went away: every client's flow ends (the forwards stay); the
    // next tap's guest may have another MAC.
    void tap_detached();

private:
    struct Forward {
        UniqueFd fd; // invalid: free entry
        bool wildcard = false; // bound to 0.0.0.0 or ::: replies pick their source
        sockaddr_storage host{};
        socklen_t host_len = 0;
        uint8_t guest[16]{}; // IPv4-mapped unless v6
        bool v6 = false;
        uint16_t guest_port = 0;
    };

    void close_client(uint32_t idx);
    void close_forward_flows(size_t slot);
    // The client's flow (in clients_) of its datagrams on forward slot,
    // opened if new; nullopt: refused (counted).
    std::optional<uint32_t> forwarded_flow(size_t slot, const ClientAddr &client,
                                           socklen_t len, int64_t now_ms);
    // The port a new client of forward slot comes from as the guest sees
    // it (ep.remote_port): its own unless that 4-tuple is taken; nullopt:
    // no free one found.
    std::optional<uint16_t> visible_port(size_t slot, const ClientAddr &client,
                                         const Endpoints &ep) const;
    void send_arp(uint32_t guest4);

    const FastPathConfig &cfg_;
    const EventSource &events_;
    GuestSink &guest_;
    const FlowTable<Flow> &guest_flows_;
    ReadBuffers &rx_;
    FastPathStats &stats_;
    Carrier &carrier_;
    ClientPool clients_;
    uint64_t port_seed_; // visible_port's draws
    std::vector<Forward> fwds_;
    std::array<ClientAddr, ReadBuffers::kBatch> rx_names_{};
    uint8_t guest_mac_[6]{};
    bool guest_mac_known_ = false;
    int64_t last_arp_ms_ = -1;
};

} // namespace rknp::udp
