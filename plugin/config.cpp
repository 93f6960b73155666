#include "config.hpp"

#include <arpa/inet.h>

#include <cstring>
#include <map>

#include "error.hpp"

namespace rknp {

namespace {

const char *or_default(const char *s, const char *def) {
    return s != nullptr ? s : def;
}

bool in_ipv6_prefix(const in6_addr &a) {
    in6_addr prefix = parse_ipv6("ipv6 prefix", kIpv6Prefix);
    return std::memcmp(a.s6_addr, prefix.s6_addr, kIpv6PrefixLen / 8) == 0;
}

bool parse_bool(std::string_view key, const std::string &v) {
    if (v == "1") return true;
    if (v == "0") return false;
    throw_invalid("invalid " + std::string(key) + " \"" + v +
                  "\": expected 0 or 1");
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
        c.disable_dns > 1 || c.disable_offload > 1 || c.enable_dhcp > 1)
        throw_invalid("invalid rknp_config: flags must be 0 or 1");
    p.disable_host_loopback = c.disable_host_loopback;
    p.ipv6 = c.enable_ipv6;
    p.disable_dns = c.disable_dns;
    p.offload = !c.disable_offload;
    p.enable_dhcp = c.enable_dhcp;
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

ChildSetup ChildSetup::make(const ParentConfig &cfg, std::string socket_path) {
    ChildSetup s;
    s.socket_path = std::move(socket_path);
    s.ifname = cfg.ifname;
    s.mtu = cfg.mtu;
    s.ip = cfg.cidr.guest();
    s.prefix_len = cfg.cidr.prefix_len;
    s.gateway = cfg.cidr.gateway();
    s.mac = cfg.mac;
    s.ipv6 = cfg.ipv6;
    s.offload = cfg.offload;
    s.ipv6_address = cfg.ipv6_address;
    s.timeout_ms = cfg.handover_timeout_ms;
    return s;
}

KeyValues ChildSetup::encode() const {
    KeyValues kv{
        {"rknp.socket", socket_path},
        {"rknp.ifname", ifname},
        {"rknp.mtu", std::to_string(mtu)},
        {"rknp.ip", format_ipv4(ip)},
        {"rknp.prefix_len", std::to_string(prefix_len)},
        {"rknp.gateway", format_ipv4(gateway)},
        {"rknp.ipv6", ipv6 ? "1" : "0"},
        {"rknp.offload", offload ? "1" : "0"},
        {"rknp.timeout_ms", std::to_string(timeout_ms)},
    };
    if (mac) kv.emplace_back("rknp.mac", format_mac(*mac));
    if (ipv6_address)
        kv.emplace_back("rknp.ipv6_address", format_ipv6(*ipv6_address));
    return kv;
}

ChildSetup ChildSetup::decode(const KeyValues &kv) {
    std::map<std::string, std::string> m(kv.begin(), kv.end());
    auto need = [&](const char *key) -> const std::string & {
        auto it = m.find(key);
        if (it == m.end())
            throw_invalid(std::string("missing opaque key \"") + key +
                          "\" (was it produced by rknp_parent_start?)");
        return it->second;
    };
    ChildSetup s;
    s.socket_path = need("rknp.socket");
    if (s.socket_path.empty() || s.socket_path[0] != '/')
        throw_invalid("invalid rknp.socket \"" + s.socket_path +
                      "\": must be an absolute path");
    s.ifname = need("rknp.ifname");
    check_ifname("rknp.ifname", s.ifname);
    s.mtu = parse_u32("rknp.mtu", need("rknp.mtu"), kMtuMin, kMtuMax);
    s.ip = parse_ipv4("rknp.ip", need("rknp.ip"));
    s.prefix_len = parse_u32("rknp.prefix_len", need("rknp.prefix_len"), 1, 32);
    s.gateway = parse_ipv4("rknp.gateway", need("rknp.gateway"));
    s.ipv6 = parse_bool("rknp.ipv6", need("rknp.ipv6"));
    s.timeout_ms =
        parse_u32("rknp.timeout_ms", need("rknp.timeout_ms"), 1, 600000);
    // Absent in opaque maps of parents that predate offloads.
    if (auto it = m.find("rknp.offload"); it != m.end())
        s.offload = parse_bool("rknp.offload", it->second);
    else
        s.offload = false;
    if (auto it = m.find("rknp.mac"); it != m.end())
        s.mac = parse_mac("rknp.mac", it->second);
    if (auto it = m.find("rknp.ipv6_address"); it != m.end())
        s.ipv6_address = parse_ipv6("rknp.ipv6_address", it->second);
    return s;
}

} // namespace rknp
