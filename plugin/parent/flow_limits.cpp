// SPDX-License-Identifier: Apache-2.0

// Admitting new guest flows under max_flows and max_new_flows_per_sec.
#include "parent/flow_limits.hpp"

#include <algorithm>

namespace rknp {

uint32_t effective_max_flows(uint32_t configured, uint64_t nofile_soft) {
    uint64_t m = configured;
    if (nofile_soft != 0) m = std::min<uint64_t>(m, nofile_soft - nofile_soft / 4);
    return uint32_t(std::max<uint64_t>(m, 1));
}

FlowLimits::FlowLimits(uint32_t max_flows, uint32_t max_new_per_sec,
                       Stats &stats, uint64_t now_ms)
    : max_flows_(std::max<uint32_t>(max_flows, 1)),
      max_lingering_(std::max<size_t>(max_flows_ / 2, 1)), stats_(stats),
      bucket_(max_new_per_sec, now_ms) {}

FlowLimits::Admit FlowLimits::admit(size_t flows, uint64_t now_ms, bool lingering,
                                    size_t lingering_flows) {
    if (flows >= max_flows_ || (lingering && lingering_flows >= max_lingering_)) {
        Stats::add(stats_.flows_refused, 1);
        return Admit::Full;
    }
    if (!bucket_.take(now_ms)) {
        Stats::add(stats_.flows_rate_limited, 1);
        return Admit::RateLimited;
    }
    return Admit::Ok;
}

} // namespace rknp
