// SPDX-License-Identifier: Apache-2.0

// ParentConfig::from_c: defaults like slirp4netns/rootlesskit, every bad
// value refused with the option named.
#include <doctest/doctest.h>

#include "common/config.hpp"
#include "common/error.hpp"

using namespace rknp;

namespace {

rknp_config defaults() { return default_config(); }

std::string error_of(const rknp_config &c) {
    try {
        ParentConfig::from_c(c);
    } catch (const Error &e) {
        CHECK(e.code() == RKNP_ERR_INVALID_ARGUMENT);
        return e.what();
    }
    return "no error";
}

} // namespace

TEST_CASE("default configuration matches slirp4netns/rootlesskit") {
    auto p = ParentConfig::from_c(defaults());
    CHECK(p.mtu == 65520);
    CHECK(format_ipv4(p.cidr.network) == "10.0.2.0");
    CHECK(p.cidr.prefix_len == 24);
    CHECK(p.ifname == "tap0");
    CHECK_FALSE(p.disable_host_loopback);
    CHECK_FALSE(p.ipv6);
    CHECK_FALSE(p.disable_dns);
    CHECK_FALSE(p.mac.has_value());
    CHECK(p.handover_timeout_ms == 10000);
    CHECK(p.tcp_fast_path); // since 1.3
}

TEST_CASE("tcp_path: the fast path unless libslirp is asked for") {
    auto c = defaults();
    for (uint8_t path : {RKNP_TCP_PATH_DEFAULT, RKNP_TCP_PATH_FAST}) {
        c.tcp_path = path;
        CHECK(ParentConfig::from_c(c).tcp_fast_path);
    }
    c.tcp_path = RKNP_TCP_PATH_SLIRP;
    CHECK_FALSE(ParentConfig::from_c(c).tcp_fast_path);
}

TEST_CASE("every bad option value is named in the error") {
    auto c = defaults();
    c.mtu = 67;
    CHECK(error_of(c) == "invalid mtu \"67\": must be 68..65520");
    c = defaults();
    c.mtu = 65521;
    CHECK(error_of(c) == "invalid mtu \"65521\": must be 68..65520");
    c = defaults();
    c.cidr = "10.0.2.1/24";
    CHECK(error_of(c).rfind("invalid cidr \"10.0.2.1/24\"", 0) == 0);
    c = defaults();
    c.ifname = "this-name-is-too-long";
    CHECK(error_of(c).rfind("invalid ifname", 0) == 0);
    c = defaults();
    c.mac_address = "zz";
    CHECK(error_of(c).rfind("invalid mac_address \"zz\"", 0) == 0);
    c = defaults();
    c.outbound_addr = "1.2.3";
    CHECK(error_of(c).rfind("invalid outbound_addr \"1.2.3\"", 0) == 0);
    c = defaults();
    c.outbound_addr6 = "::g";
    CHECK(error_of(c).rfind("invalid outbound_addr6", 0) == 0);
    c = defaults();
    c.ipv6_address = "fd00::10";
    CHECK(error_of(c) ==
          "invalid ipv6_address \"fd00::10\": IPv6 is not enabled");
    c.enable_ipv6 = 1;
    CHECK_NOTHROW(ParentConfig::from_c(c));
    c.ipv6_address = "fd01::10";
    CHECK(error_of(c).find("must be a host in fd00::/64") != std::string::npos);
    c.ipv6_address = "fd00::2";
    CHECK(error_of(c).find("must be a host in fd00::/64") != std::string::npos);
    c = defaults();
    c.enable_ipv6 = 1;
    c.mtu = 1000;
    CHECK(error_of(c) == "invalid mtu \"1000\": IPv6 needs at least 1280");
    c = defaults();
    c.enable_ipv6 = 2;
    CHECK(error_of(c).find("flags must be 0 or 1") != std::string::npos);
    c = defaults();
    c.handover_timeout_ms = 0;
    CHECK(error_of(c).rfind("invalid handover_timeout_ms", 0) == 0);
    c = defaults();
    c.enable_dhcp = 2;
    CHECK(error_of(c) == "invalid rknp_config: flags must be 0 or 1");
}

TEST_CASE("1.3 limits: 0 takes the default, others are range-checked") {
    auto p = ParentConfig::from_c(defaults());
    CHECK(p.max_flows == 16384);
    CHECK(p.max_new_flows_per_sec == 20000);
    CHECK(p.sandbox);
    auto c = defaults();
    c.max_flows = 100;
    c.max_new_flows_per_sec = 7;
    c.disable_sandbox = 1;
    p = ParentConfig::from_c(c);
    CHECK(p.max_flows == 100);
    CHECK(p.max_new_flows_per_sec == 7);
    CHECK_FALSE(p.sandbox);
    c = defaults();
    c.max_flows = (1u << 20) + 1;
    CHECK(error_of(c) == "invalid max_flows \"1048577\": must be 1..1048576");
    c = defaults();
    c.max_new_flows_per_sec = (1u << 20) + 1;
    CHECK(error_of(c).rfind("invalid max_new_flows_per_sec", 0) == 0);
    c = defaults();
    c.disable_sandbox = 2;
    CHECK(error_of(c) == "invalid rknp_config: flags must be 0 or 1");
}
