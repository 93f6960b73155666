// SPDX-License-Identifier: Apache-2.0

// Classifying guest frames that would make libslirp open host sockets, and
// admitting them before slirp_input.
#include "slirp/flow_gate.hpp"

#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "datapath/checksum.hpp"
#include "datapath/flows/endpoints.hpp"

namespace rknp {

namespace {

constexpr uint16_t kIpv4 = 0x0800, kIpv6 = 0x86dd;
constexpr uint8_t kTcp = 6, kUdp = 17, kIcmp = 1;
constexpr uint8_t kFin = 0x01, kSyn = 0x02, kRst = 0x04, kAck = 0x10;
constexpr uint8_t kIcmpEcho = 8;

// The flow of a transport header at l4 (len bytes left), or no candidate.
NewFlow transport(uint8_t proto, const uint8_t *l4, size_t len,
                  const uint8_t src[16], const uint8_t dst[16]) {
    NewFlow nf;
    switch (proto) {
    case kTcp:
        if (len < 20 || (l4[13] & (kSyn | kAck | kRst | kFin)) != kSyn) return nf;
        nf.candidate = true;
        nf.key.proto = kTcp;
        std::memcpy(nf.key.src, src, 16);
        std::memcpy(nf.key.dst, dst, 16);
        nf.key.sport = be16(l4);
        nf.key.dport = be16(l4 + 2);
        return nf;
    case kUdp:
        if (len < 8) return nf;
        nf.candidate = true;
        nf.key.proto = kUdp;
        std::memcpy(nf.key.src, src, 16);
        nf.key.sport = be16(l4);
        return nf;
    default:
        return nf;
    }
}

} // namespace

NewFlow classify_new_flow(std::span<const uint8_t> f, const Ipv4Cidr &net) {
    if (f.size() < kEthLen + 20) return {};
    const uint8_t *ip = f.data() + kEthLen;
    size_t rest = f.size() - kEthLen;
    uint8_t src[16], dst[16];
    switch (be16(f.data() + 12)) {
    case kIpv4: {
        size_t ihl = size_t(ip[0] & 0x0f) * 4;
        if ((ip[0] >> 4) != 4 || ihl < 20 || rest < ihl) return {};
        size_t total = std::min<size_t>(be16(ip + 2), rest);
        if (total < ihl) return {};
        map_v4(ip + 12, src);
        map_v4(ip + 16, dst);
        const uint8_t *l4 = ip + ihl;
        size_t len = total - ihl;
        if (ip[9] == kIcmp) {
            uint32_t d = be32(ip + 16);
            NewFlow nf;
            nf.candidate = len >= 8 && l4[0] == kIcmpEcho &&
                           d != net.gateway() && d != net.dns();
            return nf;
        }
        return transport(ip[9], l4, len, src, dst);
    }
    case kIpv6: {
        if ((ip[0] >> 4) != 6 || rest < 40) return {};
        std::memcpy(src, ip + 8, 16);
        std::memcpy(dst, ip + 24, 16);
        size_t len = std::min<size_t>(be16(ip + 4), rest - 40);
        return transport(ip[6], ip + 40, len, src, dst);
    }
    default:
        return {};
    }
}

SlirpFlowGate::SlirpFlowGate(const Ipv4Cidr &net, uint32_t max_flows, AdmitFlow admit)
    : net_(net), admit_(std::move(admit)),
      sockets_(size_t(std::max<uint32_t>(max_flows, 1)) + kGuestSocketSlack) {}

bool SlirpFlowGate::begin(std::span<const uint8_t> frame) {
    const NewFlow nf = classify_new_flow(frame, net_);
    // Sockets registered during any slirp_input are the guest's, candidate
    // or not: they are counted either way.
    if (nf.candidate && !sockets_.contains(nf.key) &&
        admit_(nf.key.proto != IPPROTO_TCP) != Admission::Accept)
        return false;
    sockets_.begin_input(nf.key);
    return true;
}

} // namespace rknp
