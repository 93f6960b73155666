// SPDX-License-Identifier: Apache-2.0

// Validation of rknp_config into a ParentConfig.
#include "common/config.hpp"

#include <arpa/inet.h>

#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

// rknp_config 1.6: where the IPv4 network's addresses are, and what its
// other addresses mean. Each address is checked against those named
// before it, so a message names both.
void apply_layout(const rknp_config &c, ParentConfig &p) {
    if (c.network_model > RKNP_NETWORK_MODEL_HOST)
        throw_invalid("invalid network_model \"" +
                      std::to_string(c.network_model) +
                      "\": must be RKNP_NETWORK_MODEL_SLIRP or _HOST");
    p.host_network = c.network_model == RKNP_NETWORK_MODEL_HOST;
    Ipv4Cidr &n = p.cidr;
    const std::string net = format_ipv4(n.network) + "/" + std::to_string(n.prefix_len);
    // The default guest .100 needs 128 addresses: the cidr is what is wrong.
    if (c.guest_address == nullptr && n.prefix_len > 25)
        throw_invalid("invalid cidr \"" + net +
                      "\": prefix length must be 1..25 for the default guest "
                      "address .100 (up to 30 with guest_address set)");
    std::vector<std::pair<uint32_t, std::string>> taken{
        {n.network, "the network address"}, {n.broadcast(), "the broadcast address"}};
    auto place = [&](const char *field, const char *text, uint32_t def,
                     bool in_network) {
        uint32_t a = text != nullptr ? parse_ipv4(field, text) : def;
        const std::string shown = text != nullptr ? text : format_ipv4(a);
        if (in_network && !n.contains(a))
            throw_invalid(std::string("invalid ") + field + " \"" + shown +
                          "\": not in " + net +
                          (field == std::string_view("dns_address")
                               ? " (outside it needs network_model "
                                 "RKNP_NETWORK_MODEL_HOST)"
                               : ""));
        if (!is_unicast4(a))
            throw_invalid(std::string("invalid ") + field + " \"" + shown +
                          "\": not a unicast address");
        for (const auto &[b, what] : taken)
            if (a == b)
                throw_invalid(std::string("invalid ") + field + " \"" + shown +
                              "\": " + what + (in_network ? " of " + net : ""));
        taken.emplace_back(a, std::string("the ") + field);
        return a;
    };
    n.guest_addr = place("guest_address", c.guest_address, n.guest_addr, true);
    n.gateway_addr = place("gateway", c.gateway, n.gateway_addr, true);
    n.dns_addr = place("dns_address", c.dns_address, n.dns_addr, !p.host_network);
    // libslirp hands out DHCP leases from its first address on: the guest's
    // own when the caller placed it.
    if (c.guest_address != nullptr) n.dhcp_addr = n.guest_addr;
    if (c.map_guest_addr != nullptr)
        p.map_guest_addr = place("map_guest_addr", c.map_guest_addr, 0, false);
    if (c.map_host_loopback != nullptr)
        p.map_host_loopback = place("map_host_loopback", c.map_host_loopback, 0, false);
    if (!p.host_network) {
        if (p.map_guest_addr || p.map_host_loopback)
            throw_invalid(std::string("invalid ") +
                          (p.map_guest_addr ? "map_guest_addr" : "map_host_loopback") +
                          ": needs network_model RKNP_NETWORK_MODEL_HOST");
        return;
    }
    // pasta's model: libslirp must see none of the guest's unicast flows,
    // or it takes the neighbours for its own aliases of the host's
    // loopback.
    if (!p.tcp_fast_path || !p.udp_fast_path || !p.offload)
        throw_invalid(std::string("invalid network_model "
                                  "RKNP_NETWORK_MODEL_HOST: needs ") +
                      (!p.tcp_fast_path   ? "the TCP fast path (tcp_path is _SLIRP)"
                       : !p.udp_fast_path ? "the UDP fast path (udp_path is _SLIRP)"
                                          : "offloads (disable_offload is set)"));
}

// rknp_config's IPv6 fields: the guest's address in libslirp's fd00::/64,
// or (1.7) pasta's model, the host's IPv6 network; and IPv6 alone.
void apply_ipv6(const rknp_config &c, ParentConfig &p) {
    auto invalid = [](const char *field, const char *text, const std::string &why) {
        throw_invalid(std::string("invalid ") + field + " \"" + text + "\": " + why);
    };
    if (c.disable_ipv4 > 1) throw_invalid("invalid rknp_config: flags must be 0 or 1");
    p.disable_ipv4 = c.disable_ipv4;
    if (p.disable_ipv4 && (!p.ipv6 || p.enable_dhcp))
        throw_invalid(std::string("invalid disable_ipv4: needs ") +
                      (!p.ipv6 ? "enable_ipv6" : "enable_dhcp 0"));
    if (c.ipv6_network == nullptr) {
        for (const auto &[field, text] :
             {std::pair{"ipv6_gateway", c.ipv6_gateway},
              std::pair{"map_guest_addr6", c.map_guest_addr6},
              std::pair{"map_host_loopback6", c.map_host_loopback6},
              std::pair{"dns_address6", c.dns_address6}})
            if (text != nullptr) invalid(field, text, "needs ipv6_network");
        if (c.ipv6_address == nullptr) return;
        if (!p.ipv6) invalid("ipv6_address", c.ipv6_address, "IPv6 is not enabled");
        auto a = parse_ipv6("ipv6_address", c.ipv6_address);
        if (!in_ipv6_prefix(a) || format_ipv6(a) == kIpv6Gateway ||
            format_ipv6(a) == kIpv6Dns || format_ipv6(a) == kIpv6Prefix)
            invalid("ipv6_address", c.ipv6_address,
                    "must be a host in fd00::/64 other than fd00::, fd00::2 and "
                    "fd00::3");
        p.ipv6_address = a;
        return;
    }
    // pasta's model for IPv6: the same fast paths as for IPv4 carry it all.
    if (!p.ipv6) invalid("ipv6_network", c.ipv6_network, "IPv6 is not enabled");
    if (!p.host_network)
        invalid("ipv6_network", c.ipv6_network,
                "needs network_model RKNP_NETWORK_MODEL_HOST");
    Ipv6HostNetwork h;
    h.prefix = Ipv6Prefix::parse("ipv6_network", c.ipv6_network);
    if (!is_global_unicast6(h.prefix.network))
        invalid("ipv6_network", c.ipv6_network, "not a global unicast network");
    if (c.ipv6_address == nullptr)
        invalid("ipv6_network", c.ipv6_network, "needs ipv6_address");
    const in6_addr guest = parse_ipv6("ipv6_address", c.ipv6_address);
    if (!h.prefix.contains(guest) || !is_global_unicast6(guest))
        invalid("ipv6_address", c.ipv6_address,
                std::string("not a unicast address in ") + c.ipv6_network);
    if (c.ipv6_gateway != nullptr) {
        h.gateway = parse_ipv6("ipv6_gateway", c.ipv6_gateway);
        if (!(is_link_local6(h.gateway) ||
              (h.prefix.contains(h.gateway) && is_global_unicast6(h.gateway))))
            invalid("ipv6_gateway", c.ipv6_gateway,
                    std::string("neither in ") + c.ipv6_network + " nor link-local");
    } else {
        // The network's ::1, or ::2 when that is the guest's.
        if (h.prefix.len > 126)
            invalid("ipv6_network", c.ipv6_network,
                    "a prefix longer than /126 needs ipv6_gateway");
        h.gateway = h.prefix.network;
        h.gateway.s6_addr[15] |= 1;
        if (same_ipv6(h.gateway, guest)) h.gateway.s6_addr[15] ^= 3;
    }
    if (same_ipv6(h.gateway, guest))
        invalid("ipv6_gateway", format_ipv6(h.gateway).c_str(), "the ipv6_address");
    auto mapped = [&](const char *field, const char *text) -> std::optional<in6_addr> {
        if (text == nullptr) return std::nullopt;
        const in6_addr a = parse_ipv6(field, text);
        if (!is_global_unicast6(a) && !is_link_local6(a))
            invalid(field, text, "not a unicast address");
        if (same_ipv6(a, guest)) invalid(field, text, "the ipv6_address");
        if (same_ipv6(a, h.gateway)) invalid(field, text, "the ipv6_gateway");
        return a;
    };
    h.map_guest = mapped("map_guest_addr6", c.map_guest_addr6);
    h.map_loopback = mapped("map_host_loopback6", c.map_host_loopback6);
    if (h.map_guest && h.map_loopback && same_ipv6(*h.map_guest, *h.map_loopback))
        invalid("map_host_loopback6", c.map_host_loopback6, "the map_guest_addr6");
    // DNS to it goes to the host's resolver, as dns_address for IPv4; its
    // own switch (disable_dns is libslirp's and dns_address's).
    h.dns = mapped("dns_address6", c.dns_address6);
    for (const auto &[m, field] : {std::pair{h.map_guest, "map_guest_addr6"},
                                   std::pair{h.map_loopback, "map_host_loopback6"}})
        if (h.dns && m && same_ipv6(*h.dns, *m))
            invalid("dns_address6", c.dns_address6, std::string("the ") + field);
    p.ipv6_address = guest;
    p.ipv6_host = h;
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
    apply_layout(c, p);
    if (p.ipv6 && p.mtu < kIpv6MtuMin)
        throw_invalid("invalid mtu \"" + std::to_string(p.mtu) +
                      "\": IPv6 needs at least 1280");
    apply_ipv6(c, p);
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
