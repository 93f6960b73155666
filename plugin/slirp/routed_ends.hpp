// SPDX-License-Identifier: Apache-2.0

// The addresses routed behind the guest that libslirp's forwards go to
// (ForwardSpec::routed: a container on a bridge network in the namespace):
// which frames from them libslirp may see, and the ARP answers libslirp
// needs to send to them. libslirp addresses every frame by ARP, and such
// an address answers none (the guest routes it), so libslirp's requests
// for one are answered here with the guest's MAC, or, while that is not
// known yet, turned into a request for the guest's own address. Stack
// thread only.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "datapath/forward_spec.hpp"

namespace rknp {

class RoutedEnds {
public:
    static constexpr size_t kArpLen = 42;
    using ArpFrame = std::array<uint8_t, kArpLen>;

    // guest4: the guest's own address (host byte order).
    explicit RoutedEnds(uint32_t guest4) : guest4_(guest4) {}

    bool empty() const { return ends_.empty(); }
    // A routed forward libslirp took, and one removed. A TCP end stays
    // known after its last forward is gone: the connections libslirp
    // accepted on it go on (their segments make no socket); a UDP end
    // goes (a datagram from it would make one).
    void add(const ForwardSpec &f);
    void remove(const ForwardSpec &f);

    // A whole IPv4 TCP or UDP frame from outside the guest's addresses:
    // whether libslirp may see it. From an end of a forward, of that
    // protocol and port; TCP never a bare SYN (a new connection).
    bool admits(std::span<const uint8_t> frame) const;

    // The guest's MAC, from any frame of its own (a request rewritten
    // meanwhile is then answered: next_answer).
    void learn(std::span<const uint8_t> frame);

    // A frame libslirp sends: Pass (not an ARP request for an end), Held
    // (answered: the reply waits in next_answer, the request goes
    // nowhere) or Rewritten (into `out`: a request for the guest's own
    // address, whose answer teaches both libslirp and this the MAC).
    enum class Arp { Pass, Held, Rewritten };
    Arp from_slirp(std::span<const uint8_t> frame, ArpFrame &out);
    // The ARP replies owed to libslirp, one a call; false when none is.
    bool next_answer(ArpFrame &out);

private:
    struct End {
        uint32_t addr;
        uint16_t port;
        bool udp;
        uint32_t forwards; // TCP: 0 once its forwards are gone
    };
    std::vector<End> ends_;
    std::vector<ArpFrame> owed_; // at most one an end: reserved by add()
    // libslirp's last request rewritten while the MAC was unknown: answered
    // once it is known.
    ArpFrame asked_frame_{};
    bool asked_ = false;
    uint32_t guest4_;
    uint8_t mac_[6]{};
    bool mac_known_ = false;
};

} // namespace rknp
