// SPDX-License-Identifier: Apache-2.0

// Fuzz target: rknp::ParentConfig::from_c on arbitrary rknp_config values,
// then the opaque pairs a valid config produces must decode to the same
// child setup. Only rknp::Error may escape validation; anything else
// (std::out_of_range, a crash, a sanitizer report) is a finding.
//
// Input: struct_size selector, mtu, flag bytes, timeout, a presence mask,
// then the six strings, each NUL-terminated, then enable_dhcp and
// udp_path.
#include <arpa/inet.h>

#include <cstring>
#include <string>

#include "common/config.hpp"
#include "handover/child_setup.hpp"
#include "common/error.hpp"
#include "fuzz_input.hpp"
#include "struct_versions.hpp"

using namespace rknp;

namespace {

bool same(const in6_addr &a, const in6_addr &b) {
    return std::memcmp(&a, &b, sizeof a) == 0;
}

void check_roundtrip(const ParentConfig &p) {
    fuzz::require(p.mtu >= kMtuMin && p.mtu <= kMtuMax, "mtu out of range");
    fuzz::require(p.cidr.prefix_len >= 1 && p.cidr.prefix_len <= 25,
                  "prefix out of range");
    ChildSetup s = ChildSetup::make(p, "/run/rknp/rknp.sock",
                                   handover::Tokens{});
    ChildSetup d = ChildSetup::decode(s.encode());
    fuzz::require(d.socket_path == s.socket_path && d.ifname == s.ifname &&
                      d.mtu == s.mtu && d.ip == s.ip &&
                      d.prefix_len == s.prefix_len && d.gateway == s.gateway &&
                      d.ipv6 == s.ipv6 && d.offload == s.offload &&
                      d.timeout_ms == s.timeout_ms && d.mac == s.mac &&
                      d.tokens.parent == s.tokens.parent &&
                      d.tokens.child == s.tokens.child,
                  "opaque round trip changed the setup");
    fuzz::require(d.ipv6_address.has_value() == s.ipv6_address.has_value() &&
                      (!d.ipv6_address || same(*d.ipv6_address, *s.ipv6_address)),
                  "opaque round trip changed ipv6_address");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Input in(data, size);
    rknp_config c = default_config();
    // Mostly the whole struct; sometimes too small (must be refused), an
    // older minor's size (its missing tail takes defaults) or larger.
    uint8_t sel = in.u8();
    c.struct_size = sel < 200   ? uint32_t(sizeof c)
                    : sel < 240 ? uint32_t(RKNP_CONFIG_SIZE_1_0)
                                : uint32_t(sel) - 180;
    if (in.u8() & 1) c.mtu = in.u32();
    c.disable_host_loopback = in.u8();
    c.enable_ipv6 = in.u8();
    c.disable_dns = in.u8();
    c.disable_offload = in.u8();
    if (in.u8() & 1) c.handover_timeout_ms = in.u32();
    uint8_t present = in.u8();
    std::string s[6];
    for (auto &str : s) str = in.cstr();
    const char **fields[6] = {&c.cidr,          &c.ifname,
                              &c.ipv6_address,  &c.outbound_addr,
                              &c.outbound_addr6, &c.mac_address};
    for (int i = 0; i < 6; ++i)
        if (present & (1u << i)) *fields[i] = s[i].c_str();
    c.enable_dhcp = in.u8(); // last: older seeds leave it 0
    c.udp_path = in.u8();    // after it, for the same reason
    try {
        check_roundtrip(
            ParentConfig::from_c(read_versioned(c, default_config())));
    } catch (const Error &e) {
        fuzz::require(e.code() == RKNP_ERR_INVALID_ARGUMENT,
                      "validation error with a code other than INVALID_ARGUMENT");
        fuzz::require(std::strlen(e.what()) > 0, "empty error message");
    }
    return 0;
}
