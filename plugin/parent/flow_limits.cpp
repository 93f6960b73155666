// SPDX-License-Identifier: Apache-2.0

// Classifying guest frames that would make host sockets, and admitting them
// under max_flows and max_new_flows_per_sec.
#include "parent/flow_limits.hpp"

#include <algorithm>
#include <cstring>

#include "datapath/checksum.hpp"

namespace rknp {

namespace {

constexpr size_t kEthLen = 14;
constexpr uint16_t kIpv4 = 0x0800, kIpv6 = 0x86dd;
constexpr uint8_t kTcp = 6, kUdp = 17, kIcmp = 1;
constexpr uint8_t kFin = 0x01, kSyn = 0x02, kRst = 0x04, kAck = 0x10;
constexpr uint8_t kIcmpEcho = 8;

void map_v4(const uint8_t *v4, uint8_t out[16]) {
    std::memset(out, 0, 10);
    out[10] = out[11] = 0xff;
    std::memcpy(out + 12, v4, 4);
}

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

uint32_t effective_max_flows(uint32_t configured, uint64_t nofile_soft) {
    uint64_t m = configured;
    if (nofile_soft != 0) m = std::min<uint64_t>(m, nofile_soft - nofile_soft / 4);
    return uint32_t(std::max<uint64_t>(m, 1));
}

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

FlowLimits::FlowLimits(uint32_t max_flows, uint32_t max_new_per_sec,
                       Stats &stats, uint64_t now_ms)
    : max_flows_(std::max<uint32_t>(max_flows, 1)),
      max_lingering_(std::max<size_t>(max_flows_ / 2, 1)), stats_(stats),
      bucket_(max_new_per_sec, now_ms),
      sockets_(size_t(max_flows_) + kGuestSocketSlack) {}

FlowLimits::Admit FlowLimits::admit(size_t fast_flows, uint64_t now_ms,
                                     bool lingering, size_t fast_lingering) {
    if (host_sockets(fast_flows) >= max_flows_ ||
        (lingering && sockets_.lingering() + fast_lingering >= max_lingering_)) {
        Stats::add(stats_.flows_refused, 1);
        return Admit::Full;
    }
    if (!bucket_.take(now_ms)) {
        Stats::add(stats_.flows_rate_limited, 1);
        return Admit::RateLimited;
    }
    return Admit::Ok;
}

bool FlowLimits::begin_slirp_input(std::span<const uint8_t> frame,
                                   const Ipv4Cidr &net, size_t fast_flows,
                                   uint64_t now_ms, size_t fast_lingering) {
    NewFlow nf = classify_new_flow(frame, net);
    // Sockets registered during any slirp_input are the guest's, candidate
    // or not: they are counted either way.
    if (nf.candidate && !sockets_.contains(nf.key) &&
        admit(fast_flows, now_ms, nf.key.proto != IPPROTO_TCP, fast_lingering) != Admit::Ok)
        return false;
    sockets_.begin_input(nf.key);
    return true;
}

} // namespace rknp
