// SPDX-License-Identifier: Apache-2.0

// Validation of rknp_config into a ParentConfig.
#include "common/config.hpp"

#include <arpa/inet.h>

#include <cstring>

#include "common/error.hpp"

namespace rknp {

namespace {

const char *or_default(const char *s, const char *def) {
    return s != nullptr ? s : def;
}

bool in_ipv6_prefix(const in6_addr &a) {
    in6_addr prefix = parse_ipv6("ipv6 prefix", kIpv6Prefix);
    return std::memcmp(a.s6_addr, prefix.s6_addr, kIpv6PrefixLen / 8) == 0;
}

} // namespace

rknp_config default_config() {
    rknp_config c{};
    c.struct_size = sizeof c;
    c.mtu = kDefaultMtu;
    c.handover_timeout_ms = kDefaultHandoverTimeoutMs;
    return c;
}

ParentConfig ParentConfig::from_c(const rknp_config &c) {
    ParentConfig p;
    p.logger = Logger(c.log_fn, c.log_user_data);
    check_u32("mtu", c.mtu, kMtuMin, kMtuMax);
    p.mtu = c.mtu;
    p.cidr = Ipv4Cidr::parse("cidr", or_default(c.cidr, kDefaultCidr));
    p.ifname = or_default(c.ifname, kDefaultIfname);
    check_ifname("ifname", p.ifname);
    if (c.disable_host_loopback > 1 || c.enable_ipv6 > 1 ||
        c.disable_dns > 1 || c.disable_offload > 1 || c.enable_dhcp > 1 ||
        c.disable_sandbox > 1)
        throw_invalid("invalid rknp_config: flags must be 0 or 1");
    p.disable_host_loopback = c.disable_host_loopback;
    p.ipv6 = c.enable_ipv6;
    p.disable_dns = c.disable_dns;
    p.offload = !c.disable_offload;
    p.enable_dhcp = c.enable_dhcp;
    p.sandbox = !c.disable_sandbox;
    if (c.max_flows != 0) {
        check_u32("max_flows", c.max_flows, 1, kMaxFlowsLimit);
        p.max_flows = c.max_flows;
    }
    if (c.max_new_flows_per_sec != 0) {
        check_u32("max_new_flows_per_sec", c.max_new_flows_per_sec, 1,
                  kMaxFlowsLimit);
        p.max_new_flows_per_sec = c.max_new_flows_per_sec;
    }
    if (c.tcp_path > RKNP_TCP_PATH_SLIRP)
        throw_invalid("invalid tcp_path \"" + std::to_string(c.tcp_path) +
                      "\": must be RKNP_TCP_PATH_DEFAULT, _FAST or _SLIRP");
    // The fast path unless asked for libslirp (the default since 1.3).
    p.tcp_fast_path = c.tcp_path != RKNP_TCP_PATH_SLIRP;
    if (c.tcp_peek_mode > RKNP_TCP_PEEK_DISCARD)
        throw_invalid("invalid tcp_peek_mode \"" +
                      std::to_string(c.tcp_peek_mode) +
                      "\": must be RKNP_TCP_PEEK_AUTO, _OFFSET or _DISCARD");
    p.tcp_peek_mode = TcpPeekMode(c.tcp_peek_mode);
    if (c.udp_path > RKNP_UDP_PATH_SLIRP)
        throw_invalid("invalid udp_path \"" + std::to_string(c.udp_path) +
                      "\": must be RKNP_UDP_PATH_DEFAULT, _FAST or _SLIRP");
    // The fast path unless asked for libslirp (the default since 1.5).
    p.udp_fast_path = c.udp_path != RKNP_UDP_PATH_SLIRP;
    if (p.ipv6 && p.mtu < kIpv6MtuMin)
        throw_invalid("invalid mtu \"" + std::to_string(p.mtu) +
                      "\": IPv6 needs at least 1280");
    if (c.ipv6_address != nullptr) {
        if (!p.ipv6)
            throw_invalid("invalid ipv6_address \"" +
                          std::string(c.ipv6_address) +
                          "\": IPv6 is not enabled");
        auto a = parse_ipv6("ipv6_address", c.ipv6_address);
        if (!in_ipv6_prefix(a) || format_ipv6(a) == kIpv6Gateway ||
            format_ipv6(a) == kIpv6Dns || format_ipv6(a) == kIpv6Prefix)
            throw_invalid("invalid ipv6_address \"" +
                          std::string(c.ipv6_address) +
                          "\": must be a host in fd00::/64 other than "
                          "fd00::, fd00::2 and fd00::3");
        p.ipv6_address = a;
    }
    if (c.outbound_addr != nullptr)
        p.outbound_addr = parse_ipv4("outbound_addr", c.outbound_addr);
    if (c.outbound_addr6 != nullptr)
        p.outbound_addr6 = parse_ipv6("outbound_addr6", c.outbound_addr6);
    if (c.mac_address != nullptr)
        p.mac = parse_mac("mac_address", c.mac_address);
    check_u32("handover_timeout_ms", c.handover_timeout_ms, 1, 600000);
    p.handover_timeout_ms = c.handover_timeout_ms;
    return p;
}

} // namespace rknp
