// SPDX-License-Identifier: Apache-2.0

// Ending libslirp's forwarded connections whose host side is gone (see the
// header).
#include "slirp/forward_reaper.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "common/hash.hpp"
#include "datapath/flows/endpoints.hpp"
#include "datapath/offload.hpp"
#include "datapath/tcp/frame.hpp"
#include "datapath/tcp/seq.hpp"

namespace rknp {

namespace {

const uint8_t kZero16[16] = {};

// addr as the tracked keys hold it; false for a family other than IPv4/6.
bool addr_bytes(const sockaddr_storage &ss, uint8_t out[16], uint16_t &port, bool &v6) {
    if (ss.ss_family == AF_INET) {
        const auto &a = reinterpret_cast<const sockaddr_in &>(ss);
        map_v4(reinterpret_cast<const uint8_t *>(&a.sin_addr), out);
        port = ntohs(a.sin_port);
        v6 = false;
        return true;
    }
    if (ss.ss_family == AF_INET6) {
        const auto &a = reinterpret_cast<const sockaddr_in6 &>(ss);
        std::memcpy(out, &a.sin6_addr, 16);
        port = ntohs(a.sin6_port);
        v6 = true;
        return true;
    }
    return false;
}

} // namespace

size_t ForwardReaper::KeyHash::operator()(const Key &k) const noexcept {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 16; i += 8) {
        h = hash_mix(h, load64(k.guest + i));
        h = hash_mix(h, load64(k.remote + i));
    }
    return size_t(hash_mix(h, uint64_t(k.guest_port) << 16 | k.remote_port));
}

ForwardReaper::ForwardReaper(uint32_t gateway4, const uint8_t gateway6[16]) {
    const auto g4 = ipv4_bytes(gateway4);
    map_v4(g4.data(), gateway4_);
    std::memcpy(gateway6_, gateway6, 16);
}

namespace {

// A forward's host address as the keys hold it; all zero for any address.
void host_bytes(const ForwardSpec &f, uint8_t out[16]) {
    std::memset(out, 0, 16);
    if (f.host_v6) {
        std::memcpy(out, &f.host6, 16);
    } else if (f.host4 != 0) {
        const auto h4 = ipv4_bytes(f.host4);
        map_v4(h4.data(), out);
    }
}

} // namespace

void ForwardReaper::add_forward(const ForwardSpec &f) {
    if (f.udp) return;
    Forward w;
    w.v6 = f.host_v6;
    host_bytes(f, w.host);
    w.host_port = f.host_port;
    f.guest_bytes(w.guest);
    w.guest_port = f.guest_port;
    forwards_.push_back(w);
}

void ForwardReaper::remove_forward(const ForwardSpec &f) {
    if (f.udp) return;
    uint8_t host[16];
    host_bytes(f, host);
    for (size_t i = 0; i < forwards_.size(); ++i) {
        const Forward &w = forwards_[i];
        if (w.v6 == f.host_v6 && w.host_port == f.host_port &&
            std::memcmp(w.host, host, 16) == 0) {
            forwards_.erase(forwards_.begin() + long(i));
            return;
        }
    }
}

bool ForwardReaper::key_of(int fd, Key &out, bool &v6) const {
    // Asked at registration, while connected (a closed socket has no
    // peer); the local address first: most sockets are no forward's.
    sockaddr_storage local{}, peer{};
    socklen_t ll = sizeof local, pl = sizeof peer;
    if (::getsockname(fd, reinterpret_cast<sockaddr *>(&local), &ll) != 0) return false;
    uint8_t host[16], client[16];
    uint16_t host_port = 0, client_port = 0;
    bool local_v6 = false, peer_v6 = false;
    if (!addr_bytes(local, host, host_port, local_v6)) return false;
    const Forward *fw = nullptr;
    for (const Forward &w : forwards_)
        if (w.v6 == local_v6 && w.host_port == host_port &&
            (std::memcmp(w.host, kZero16, 16) == 0 || std::memcmp(w.host, host, 16) == 0)) {
            fw = &w;
            break;
        }
    // The guest end must be of the client's family (libslirp takes the
    // client's family to the guest).
    if (fw == nullptr || is_mapped_v4(fw->guest) == local_v6) return false;
    if (::getpeername(fd, reinterpret_cast<sockaddr *>(&peer), &pl) != 0 ||
        !addr_bytes(peer, client, client_port, peer_v6) || peer_v6 != local_v6)
        return false;
    // libslirp's sotranslate_accept: a loopback or unspecified client is
    // shown as the gateway; any other keeps its address.
    if (!local_v6) {
        const uint32_t c = ipv4_of(client);
        if (c == 0 || (c >> 24) == 127) std::memcpy(client, gateway4_, 16);
    } else {
        static const uint8_t kLoop6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        if (std::memcmp(client, kZero16, 16) == 0 || std::memcmp(client, kLoop6, 16) == 0)
            std::memcpy(client, gateway6_, 16);
    }
    out = key(fw->guest, fw->guest_port, client, client_port);
    v6 = local_v6;
    return true;
}

bool ForwardReaper::on_register(int fd) {
    if (forwards_.empty()) return false;
    Key k;
    bool v6 = false;
    if (!key_of(fd, k, v6)) return false;
    // A connection libslirp still holds on this 4-tuple is already lost
    // to its twin: keep the newest.
    Flow f;
    f.fd = fd;
    f.v6 = v6;
    auto [it, fresh] = flows_.insert_or_assign(k, f);
    (void)fresh;
    by_fd_[fd] = k;
    return true;
}

void ForwardReaper::on_unregister(int fd) {
    auto it = by_fd_.find(fd);
    if (it == by_fd_.end()) return;
    auto f = flows_.find(it->second);
    if (f != flows_.end() && f->second.fd == fd) flows_.erase(f);
    by_fd_.erase(it);
}

ForwardReaper::Key ForwardReaper::key(const uint8_t guest[16], uint16_t guest_port,
                                      const uint8_t remote[16], uint16_t remote_port) {
    Key k;
    std::memcpy(k.guest, guest, 16);
    std::memcpy(k.remote, remote, 16);
    k.guest_port = guest_port;
    k.remote_port = remote_port;
    return k;
}

ForwardReaper::Flow *ForwardReaper::find(const uint8_t guest[16], uint16_t guest_port,
                                         const uint8_t remote[16], uint16_t remote_port) {
    auto it = flows_.find(key(guest, guest_port, remote, remote_port));
    return it == flows_.end() ? nullptr : &it->second;
}

void ForwardReaper::from_slirp(std::span<const uint8_t> frame) {
    if (flows_.empty()) return;
    tcp::Segment s;
    if (tcp::parse_segment(frame, s) != Parse::Ok) return;
    Flow *found = find(s.dst, s.dport, s.src, s.sport);
    if (found == nullptr) return;
    Flow &f = *found;
    std::memcpy(f.guest_mac, frame.data(), 6);
    std::memcpy(f.slirp_mac, frame.data() + 6, 6);
    if (s.flags & tcp::kRst) return;
    if ((s.flags & tcp::kSyn) && !f.have_syn) {
        f.have_syn = true;
        f.iss = f.snd_nxt = s.seq;
    }
    if (f.have_syn) {
        const uint32_t end = s.seq + uint32_t(s.payload.size()) +
                             ((s.flags & (tcp::kSyn | tcp::kFin)) ? 1u : 0u);
        if (tcp::seq_gt(end, f.snd_nxt)) f.snd_nxt = end;
    }
    if (s.flags & tcp::kAck) {
        f.rcv_nxt = s.ack;
        f.have_ack = true;
    }
    if (s.flags & tcp::kFin) {
        f.fin_sent = true;
        f.fin_end = s.seq + uint32_t(s.payload.size()) + 1;
        f.fin_acked = false;
    }
}

void ForwardReaper::from_guest(std::span<const uint8_t> frame) {
    if (flows_.empty()) return;
    tcp::Segment s;
    if (tcp::parse_segment(frame, s) != Parse::Ok) return;
    if (!(s.flags & tcp::kAck)) return;
    auto it = flows_.find(key(s.src, s.sport, s.dst, s.dport));
    if (it == flows_.end()) return;
    Flow &f = it->second;
    if (f.reaped || !f.fin_sent || f.fin_acked || !tcp::seq_ge(s.ack, f.fin_end)) return;
    f.fin_acked = true;
    if (f.host_gone) make_due(it->first, f);
}

void ForwardReaper::host_gone(int fd, bool reset) {
    auto it = by_fd_.find(fd);
    if (it == by_fd_.end()) return;
    auto f = flows_.find(it->second);
    if (f == flows_.end() || f->second.fd != fd || f->second.host_gone || f->second.reaped)
        return;
    f->second.host_gone = true;
    // A client's reset ends the connection at once, whatever libslirp
    // still holds for the guest: what libslirp does itself when it reads
    // ECONNRESET. A clean close waits until the guest has every byte.
    if (reset || f->second.fin_acked) make_due(f->first, f->second);
}

void ForwardReaper::make_due(const Key &k, Flow &f) {
    if (!f.have_syn) return; // no sequence either end would take
    // build_segment writes frames from `remote` to `guest`: libslirp's to
    // the guest as they are, the guest's to libslirp with roles swapped.
    auto ends = [&](bool from_guest) {
        Endpoints e;
        e.v6 = f.v6;
        std::memcpy(e.guest_mac, from_guest ? f.slirp_mac : f.guest_mac, 6);
        std::memcpy(e.gw_mac, from_guest ? f.guest_mac : f.slirp_mac, 6);
        std::memcpy(e.guest, from_guest ? k.remote : k.guest, 16);
        std::memcpy(e.remote, from_guest ? k.guest : k.remote, 16);
        e.guest_port = from_guest ? k.remote_port : k.guest_port;
        e.remote_port = from_guest ? k.guest_port : k.remote_port;
        return e;
    };
    const Endpoints to_guest = ends(false), to_slirp = ends(true);
    if (f.have_ack) {
        // libslirp takes a reset at the sequence it expects next.
        push_due(to_slirp, f.rcv_nxt, 0, tcp::kRst, false);
        push_due(to_guest, f.snd_nxt, f.rcv_nxt, tcp::kRst | tcp::kAck, true);
    } else {
        // Its SYN unanswered (SYN_SENT): a reset acking it.
        push_due(to_slirp, 0, f.iss + 1, tcp::kRst | tcp::kAck, false);
        push_due(to_guest, f.iss + 1, 0, tcp::kRst, true);
    }
    f.reaped = true; // once: libslirp unregisters the socket next
    ++reaped_;
}

void ForwardReaper::push_due(const Endpoints &ep, uint32_t seq, uint32_t ack, uint8_t flags,
                             bool to_guest) {
    if (due_next_ == due_.size()) { // all taken: start over
        due_.clear();
        due_next_ = 0;
    }
    tcp::OutFields out;
    out.seq = seq;
    out.ack = ack;
    out.flags = flags;
    Due d;
    VnetHdr vnet{};
    const size_t len = tcp::build_segment(d.frame.data(), vnet, ep, out, 0, 0);
    if (!complete_checksum({d.frame.data(), len}, vnet)) return;
    d.len = uint8_t(len);
    d.to_guest = to_guest;
    due_.push_back(d);
}

bool ForwardReaper::next_due(std::span<const uint8_t> &frame, bool &to_guest) {
    if (due_next_ == due_.size()) return false;
    const Due &d = due_[due_next_++];
    frame = {d.frame.data(), d.len};
    to_guest = d.to_guest;
    return true;
}

} // namespace rknp
