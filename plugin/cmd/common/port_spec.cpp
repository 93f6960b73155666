// SPDX-License-Identifier: Apache-2.0

// Parsing of pasta's port specifications (see port_spec.hpp).
#include "port_spec.hpp"

#include <arpa/inet.h>

#include <bitset>
#include <charconv>
#include <fstream>
#include <memory>

namespace cmd {

namespace {

constexpr size_t kPorts = 65536;

[[noreturn]] void fail(std::string_view spec, const std::string &why) {
    throw PortSpecError("invalid port specifier '" + std::string(spec) +
                        "': " + why);
}

uint16_t parse_port(std::string_view spec, std::string_view s) {
    unsigned v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size())
        fail(spec, "'" + std::string(s) + "' is not a port number");
    if (v == 0 || v > 65535)
        fail(spec, "port " + std::string(s) + " is not in 1-65535");
    return uint16_t(v);
}

struct Range {
    uint16_t first, last;
};

Range parse_range(std::string_view spec, std::string_view s) {
    size_t dash = s.find('-');
    if (dash == std::string_view::npos) {
        uint16_t p = parse_port(spec, s);
        return {p, p};
    }
    Range r{parse_port(spec, s.substr(0, dash)),
            parse_port(spec, s.substr(dash + 1))};
    if (r.last < r.first)
        fail(spec, "range " + std::string(s) + " ends before it starts");
    return r;
}

bool is_address(const std::string &a) {
    unsigned char buf[16];
    return inet_pton(AF_INET, a.c_str(), buf) == 1 ||
           inet_pton(AF_INET6, a.c_str(), buf) == 1;
}

// Whether what precedes a spec's first '/' is a port item with a target
// address ("8080:10.89.0.2" of "8080:10.89.0.2/80") rather than the host
// address: its first ':' follows a port or range, and it is no IPv6
// address ("1::2" is one).
bool is_item_with_target(std::string_view s) {
    size_t colon = s.find(':');
    if (colon == 0 || colon == std::string_view::npos) return false;
    if (s.substr(0, colon).find_first_not_of("0123456789-,~") != std::string_view::npos)
        return false;
    unsigned char buf[16];
    return inet_pton(AF_INET6, std::string(s).c_str(), buf) != 1;
}

// The target of a mapping's right-hand side "TARGET/G[-H]" (brackets
// stripped): its ports are left in `to`. Returns "" when it names none.
std::string split_target(std::string_view spec, std::string_view &to) {
    size_t slash = to.rfind('/');
    if (slash == std::string_view::npos) return "";
    std::string_view addr = to.substr(0, slash);
    to = to.substr(slash + 1);
    if (addr.size() >= 2 && addr.front() == '[' && addr.back() == ']')
        addr = addr.substr(1, addr.size() - 2);
    std::string a(addr);
    if (a.empty()) fail(spec, "empty target address before '/'");
    if (!is_address(a))
        fail(spec, "target '" + a + "' is not an IPv4 or IPv6 address");
    return a;
}

// "ADDR", "[ADDR]", "ADDR%IF", "[ADDR]%IF" or "%IF".
void parse_address(std::string_view spec, std::string_view s, PortSpec &out) {
    size_t pct = s.find('%');
    std::string_view addr = s.substr(0, pct);
    if (pct != std::string_view::npos) {
        out.ifname = std::string(s.substr(pct + 1));
        if (out.ifname.empty() || out.ifname.size() > 15 ||
            out.ifname.find('/') != std::string::npos)
            fail(spec, "bad interface name '" + out.ifname + "'");
    }
    if (addr.size() >= 2 && addr.front() == '[' && addr.back() == ']')
        addr = addr.substr(1, addr.size() - 2);
    out.address = std::string(addr);
    if (!out.address.empty() && !is_address(out.address))
        fail(spec, "'" + out.address + "' is not an IPv4 or IPv6 address");
    if (out.address.empty() && out.ifname.empty())
        fail(spec, "empty address before '/'");
}

} // namespace

PortRange host_ephemeral_range() {
    PortRange r;
    std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
    unsigned first = 0, last = 0;
    if (in >> first >> last && first >= 1 && first <= last && last <= 65535) {
        r.first = uint16_t(first);
        r.last = uint16_t(last);
    }
    return r;
}

PortSpec parse_port_spec(std::string_view spec, PortRange ephemeral) {
    PortSpec out;
    if (spec == "none") return out;
    if (spec == "auto") {
        out.mode = PortMode::automatic;
        return out;
    }
    if (spec == "all")
        fail(spec, "'all' is passt's, not pasta's (name the ports)");
    out.mode = PortMode::list;
    std::string_view ports = spec;
    if (size_t slash = spec.find('/');
        slash != std::string_view::npos && !is_item_with_target(spec.substr(0, slash))) {
        parse_address(spec, spec.substr(0, slash), out);
        ports = spec.substr(slash + 1);
    }
    if (ports.empty()) fail(spec, "no ports");
    if (ports == "auto")
        fail(spec, "an address with 'auto' is not supported by rknp");

    // guest[p] is the guest port of host port p, 0 when not forwarded.
    auto guest = std::make_unique<uint16_t[]>(kPorts);
    std::bitset<kPorts> excluded;
    bool any_included = false;
    size_t pos = 0;
    while (pos <= ports.size()) {
        size_t comma = ports.find(',', pos);
        std::string_view item = ports.substr(
            pos, comma == std::string_view::npos ? std::string_view::npos
                                                 : comma - pos);
        pos = comma == std::string_view::npos ? ports.size() + 1 : comma + 1;
        if (item.empty()) fail(spec, "empty item in the port list");
        if (item.front() == '~') {
            Range r = parse_range(spec, item.substr(1));
            for (unsigned p = r.first; p <= r.last; p++) excluded.set(p);
            continue;
        }
        size_t colon = item.find(':');
        Range host = parse_range(spec, item.substr(0, colon));
        Range to = host;
        if (colon != std::string_view::npos) {
            std::string_view right = item.substr(colon + 1);
            std::string target = split_target(spec, right);
            if (target != out.target && (any_included || !out.target.empty()))
                fail(spec, "its mappings name different target addresses "
                           "(rknp takes one a spec)");
            out.target = std::move(target);
            to = parse_range(spec, right);
            if (to.last - to.first != host.last - host.first)
                fail(spec, "'" + std::string(item) +
                               "' maps ranges of different sizes");
        }
        for (unsigned p = host.first; p <= host.last; p++) {
            uint16_t g = uint16_t(to.first + (p - host.first));
            if (guest[p] != 0 && guest[p] != g)
                fail(spec, "port " + std::to_string(p) +
                               " is mapped to two guest ports");
            guest[p] = g;
        }
        any_included = true;
        if (colon == std::string_view::npos && !out.target.empty())
            fail(spec, "its mappings name different target addresses "
                       "(rknp takes one a spec)");
    }
    if (!any_included) {
        // Only exclusions: every other port but the ephemeral range.
        for (unsigned p = 1; p < kPorts; p++)
            if (p < ephemeral.first || p > ephemeral.last) guest[p] = uint16_t(p);
    }
    for (unsigned p = 1; p < kPorts; p++)
        if (guest[p] != 0 && !excluded.test(p))
            out.mappings.push_back({uint16_t(p), guest[p]});
    if (out.mappings.empty())
        fail(spec, any_included ? "it excludes every port it names"
                                : "it leaves no port outside its exclusions "
                                  "and the ephemeral range");
    return out;
}

} // namespace cmd
