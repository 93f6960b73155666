// SPDX-License-Identifier: Apache-2.0

// Encoding and strict decoding of the opaque key/value pairs.
#include "handover/child_setup.hpp"

#include <map>

#include "common/error.hpp"

namespace rknp {

namespace {

bool parse_bool(std::string_view key, const std::string &v) {
    if (v == "1") return true;
    if (v == "0") return false;
    throw_invalid("invalid " + std::string(key) + " \"" + v +
                  "\": expected 0 or 1");
}

} // namespace

ChildSetup ChildSetup::make(const ParentConfig &cfg, std::string socket_path,
                            const handover::Tokens &tokens) {
    ChildSetup s;
    s.tokens = tokens;
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
    if (cfg.ipv6_host) {
        s.ipv6_prefix_len = cfg.ipv6_host->prefix.len;
        s.ipv6_gateway = cfg.ipv6_host->gateway;
    }
    s.ipv4 = !cfg.disable_ipv4;
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
        {"rknp.parent_token", handover::format_token(tokens.parent)},
        {"rknp.child_token", handover::format_token(tokens.child)},
    };
    if (mac) kv.emplace_back("rknp.mac", format_mac(*mac));
    if (ipv6_address)
        kv.emplace_back("rknp.ipv6_address", format_ipv6(*ipv6_address));
    // Only where they differ from what an older child assumes.
    if (ipv6_gateway) {
        kv.emplace_back("rknp.ipv6_prefix_len", std::to_string(ipv6_prefix_len));
        kv.emplace_back("rknp.ipv6_gateway", format_ipv6(*ipv6_gateway));
    }
    if (!ipv4) kv.emplace_back("rknp.ipv4", "0");
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
    s.tokens.parent =
        handover::parse_token("rknp.parent_token", need("rknp.parent_token"));
    s.tokens.child =
        handover::parse_token("rknp.child_token", need("rknp.child_token"));
    // Absent in opaque maps of parents that predate offloads.
    if (auto it = m.find("rknp.offload"); it != m.end())
        s.offload = parse_bool("rknp.offload", it->second);
    else
        s.offload = false;
    if (auto it = m.find("rknp.mac"); it != m.end())
        s.mac = parse_mac("rknp.mac", it->second);
    if (auto it = m.find("rknp.ipv6_address"); it != m.end())
        s.ipv6_address = parse_ipv6("rknp.ipv6_address", it->second);
    if (auto it = m.find("rknp.ipv6_prefix_len"); it != m.end())
        s.ipv6_prefix_len = parse_u32("rknp.ipv6_prefix_len", it->second, 1, 128);
    if (auto it = m.find("rknp.ipv6_gateway"); it != m.end())
        s.ipv6_gateway = parse_ipv6("rknp.ipv6_gateway", it->second);
    if (auto it = m.find("rknp.ipv4"); it != m.end())
        s.ipv4 = parse_bool("rknp.ipv4", it->second);
    return s;
}

} // namespace rknp
