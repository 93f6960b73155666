// SPDX-License-Identifier: Apache-2.0

// libslirp's view of forwards to addresses routed behind the guest
// (routed_ends.hpp).
#include "slirp/routed_ends.hpp"

#include <algorithm>
#include <cstring>

#include "datapath/checksum.hpp"
#include "datapath/flows/endpoints.hpp"

namespace rknp {

namespace {

constexpr size_t kEth = 14;
constexpr uint8_t kTcp = 6, kUdp = 17;
constexpr uint8_t kFin = 0x01, kSyn = 0x02, kRst = 0x04, kAck = 0x10;

} // namespace

void RoutedEnds::add(const ForwardSpec &f) {
    if (!f.routed) return;
    auto it = std::find_if(ends_.begin(), ends_.end(), [&](const End &e) {
        return e.addr == f.guest && e.port == f.guest_port && e.udp == f.udp;
    });
    if (it != ends_.end()) {
        ++it->forwards;
        return;
    }
    ends_.push_back({f.guest, f.guest_port, f.udp, 1});
    owed_.reserve(ends_.size());
}

void RoutedEnds::remove(const ForwardSpec &f) {
    if (!f.routed) return;
    auto it = std::find_if(ends_.begin(), ends_.end(), [&](const End &e) {
        return e.addr == f.guest && e.port == f.guest_port && e.udp == f.udp;
    });
    if (it == ends_.end() || it->forwards == 0) return;
    if (--it->forwards == 0 && it->udp) ends_.erase(it);
}

bool RoutedEnds::admits(std::span<const uint8_t> f) const {
    if (ends_.empty() || f.size() < kEth + 20 || be16(f.data() + 12) != 0x0800) return false;
    const uint8_t *ip = f.data() + kEth;
    const size_t ihl = size_t(ip[0] & 0x0f) * 4;
    const uint8_t proto = ip[9];
    if ((ip[0] >> 4) != 4 || ihl < 20 || f.size() < kEth + ihl + (proto == kTcp ? 20 : 8))
        return false;
    const uint8_t *l4 = ip + ihl;
    if (proto == kTcp && (l4[13] & (kSyn | kAck | kRst | kFin)) == kSyn) return false;
    if (proto != kTcp && proto != kUdp) return false;
    const uint32_t src = be32(ip + 12);
    const uint16_t sport = be16(l4);
    return std::any_of(ends_.begin(), ends_.end(), [&](const End &e) {
        return e.addr == src && e.port == sport && e.udp == (proto == kUdp) &&
               (e.forwards != 0 || !e.udp);
    });
}

void RoutedEnds::learn(std::span<const uint8_t> frame) {
    if (!learn_guest_mac(frame, mac_, mac_known_) || !asked_) return;
    // The request that waited for it is answered now, before libslirp's
    // frame behind it expires (a second).
    asked_ = false;
    ArpFrame ignored;
    (void)from_slirp(asked_frame_, ignored);
}

RoutedEnds::Arp RoutedEnds::from_slirp(std::span<const uint8_t> f, ArpFrame &out) {
    // An Ethernet/IPv4 ARP request: op 1 at 20, target IP at 38.
    if (f.size() < kArpLen || be16(f.data() + 12) != 0x0806 || be16(f.data() + 20) != 1)
        return Arp::Pass;
    const uint32_t target = be32(f.data() + 38);
    if (std::none_of(ends_.begin(), ends_.end(),
                     [&](const End &e) { return e.addr == target; }))
        return Arp::Pass;
    std::memcpy(out.data(), f.data(), kArpLen);
    if (!mac_known_) {
        // Ask for the guest's own address: its reply names the MAC.
        std::memcpy(asked_frame_.data(), f.data(), kArpLen);
        asked_ = true;
        const std::array<uint8_t, 4> g = ipv4_bytes(guest4_);
        std::memcpy(out.data() + 38, g.data(), 4);
        return Arp::Rewritten;
    }
    // One reply an address at most (owed_ has room for one an end).
    if (std::any_of(owed_.begin(), owed_.end(), [&](const ArpFrame &o) {
            return std::memcmp(o.data() + 28, f.data() + 38, 4) == 0;
        }))
        return Arp::Held;
    // The reply as the guest would send it for that address: to
    // libslirp's MAC and address, from the guest's MAC.
    ArpFrame r{};
    std::memcpy(r.data(), f.data() + 6, 6); // to the requester
    std::memcpy(r.data() + 6, mac_, 6);
    r[12] = 0x08;
    r[13] = 0x06;
    const uint8_t arp[8] = {0, 1, 0x08, 0x00, 6, 4, 0, 2}; // Ethernet, IPv4, reply
    std::memcpy(r.data() + 14, arp, 8);
    std::memcpy(r.data() + 22, mac_, 6);         // sender MAC
    std::memcpy(r.data() + 28, f.data() + 38, 4); // sender IP: the end
    std::memcpy(r.data() + 32, f.data() + 22, 6); // target MAC: the requester's
    std::memcpy(r.data() + 38, f.data() + 28, 4); // target IP: the requester's
    owed_.push_back(r);
    return Arp::Held;
}

bool RoutedEnds::next_answer(ArpFrame &out) {
    if (owed_.empty()) return false;
    out = owed_.back();
    owed_.pop_back();
    return true;
}

} // namespace rknp
