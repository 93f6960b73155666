// SPDX-License-Identifier: Apache-2.0

// The opaque key/value pairs (handover/child_setup.hpp): what a parent
// encodes decodes to the same setup; missing and bad keys are refused by
// name, unknown ones ignored.
#include <doctest/doctest.h>

#include "common/config.hpp"
#include "common/error.hpp"
#include "handover/child_setup.hpp"

using namespace rknp;

namespace {

rknp_config defaults() { return default_config(); }

} // namespace

TEST_CASE("child setup round-trips through the opaque pairs") {
    auto c = defaults();
    c.cidr = "10.0.135.128/25";
    c.mtu = 1500;
    c.ifname = "eth7";
    c.mac_address = "02:00:00:00:00:07";
    c.enable_ipv6 = 1;
    c.ipv6_address = "fd00::100";
    auto tokens = handover::random_tokens();
    auto s = ChildSetup::make(ParentConfig::from_c(c), "/run/x/rknp.sock", tokens);
    auto d = ChildSetup::decode(s.encode());
    CHECK(d.socket_path == "/run/x/rknp.sock");
    CHECK(d.ifname == "eth7");
    CHECK(d.mtu == 1500);
    CHECK(format_ipv4(d.ip) == "10.0.135.228");
    CHECK(d.prefix_len == 25);
    CHECK(format_ipv4(d.gateway) == "10.0.135.130");
    REQUIRE(d.mac.has_value());
    CHECK(format_mac(*d.mac) == "02:00:00:00:00:07");
    CHECK(d.ipv6);
    REQUIRE(d.ipv6_address.has_value());
    CHECK(format_ipv6(*d.ipv6_address) == "fd00::100");
    CHECK(d.tokens.parent == tokens.parent);
    CHECK(d.tokens.child == tokens.child);
}

TEST_CASE("child setup carries pasta's IPv6 model and IPv6 alone (1.7)") {
    auto c = defaults();
    c.cidr = "192.168.1.0/24";
    c.guest_address = "192.168.1.5";
    c.network_model = RKNP_NETWORK_MODEL_HOST;
    c.enable_ipv6 = 1;
    c.ipv6_network = "2001:db8:5::/56";
    c.ipv6_address = "2001:db8:5::9";
    c.ipv6_gateway = "fe80::1";
    c.disable_ipv4 = 1;
    auto s = ChildSetup::make(ParentConfig::from_c(c), "/s", handover::random_tokens());
    auto d = ChildSetup::decode(s.encode());
    CHECK(d.ipv6_prefix_len == 56);
    REQUIRE(d.ipv6_gateway.has_value());
    CHECK(format_ipv6(*d.ipv6_gateway) == "fe80::1");
    CHECK(format_ipv6(*d.ipv6_address) == "2001:db8:5::9");
    CHECK_FALSE(d.ipv4);
    // libslirp's fd00::/64: none of the new keys, what an older child
    // assumes (/64, fd00::2, IPv4 on).
    auto old = ChildSetup::make(ParentConfig::from_c(defaults()), "/s",
                                handover::random_tokens())
                   .encode();
    for (const auto &[k, v] : old)
        CHECK((k != "rknp.ipv6_gateway" && k != "rknp.ipv6_prefix_len" && k != "rknp.ipv4"));
    auto o = ChildSetup::decode(old);
    CHECK(o.ipv4);
    CHECK(o.ipv6_prefix_len == 64);
    CHECK_FALSE(o.ipv6_gateway.has_value());
}

TEST_CASE("child setup rejects missing and bad keys, ignores unknown ones") {
    auto kv = ChildSetup::make(ParentConfig::from_c(defaults()), "/s",
                               handover::random_tokens())
                  .encode();
    kv.emplace_back("rknp.future-option", "whatever");
    CHECK_NOTHROW(ChildSetup::decode(kv));

    auto without = [&](const std::string &key) {
        KeyValues out;
        for (auto &p : kv)
            if (p.first != key) out.push_back(p);
        return out;
    };
    CHECK_THROWS_WITH_AS(ChildSetup::decode(without("rknp.socket")),
                         "missing opaque key \"rknp.socket\" (was it produced "
                         "by rknp_parent_start?)",
                         Error);
    CHECK_THROWS_AS(ChildSetup::decode(without("rknp.mtu")), Error);

    auto with = [&](const std::string &key, const std::string &value) {
        KeyValues out = without(key);
        out.emplace_back(key, value);
        return out;
    };
    CHECK_THROWS_WITH_AS(ChildSetup::decode(with("rknp.mtu", "99999")),
                         "invalid rknp.mtu \"99999\": must be 68..65520", Error);
    CHECK_THROWS_AS(ChildSetup::decode(with("rknp.socket", "relative")), Error);
    CHECK_THROWS_AS(ChildSetup::decode(with("rknp.ipv6", "yes")), Error);
    CHECK_THROWS_AS(ChildSetup::decode(with("rknp.ip", "10.0.2")), Error);
    CHECK_THROWS_AS(ChildSetup::decode(with("rknp.ifname", "a/b")), Error);
    CHECK_THROWS_AS(ChildSetup::decode({}), Error);
    // Without its tokens the child could neither check the parent nor
    // prove itself; a malformed one is refused without echoing it.
    CHECK_THROWS_WITH_AS(ChildSetup::decode(without("rknp.parent_token")),
                         doctest::Contains("missing opaque key \"rknp.parent_token\""),
                         Error);
    CHECK_THROWS_AS(ChildSetup::decode(without("rknp.child_token")), Error);
    CHECK_THROWS_WITH_AS(
        ChildSetup::decode(with("rknp.child_token", std::string(31, 'a') + "G")),
        "invalid rknp.child_token: expected 32 lowercase hex digits", Error);
    CHECK_THROWS_AS(ChildSetup::decode(with("rknp.parent_token", "00")), Error);
}

TEST_CASE("each parent's tokens are fresh random values, different from each other") {
    auto a = handover::random_tokens(), b = handover::random_tokens();
    CHECK(a.parent != a.child);
    CHECK(a.parent != b.parent);
    CHECK(a.child != b.child);
    CHECK(handover::format_token(a.parent).size() == 32);
    CHECK(handover::parse_token("k", handover::format_token(a.child)) == a.child);
}
