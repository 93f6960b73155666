// SPDX-License-Identifier: Apache-2.0

// ParentConfig::from_c: defaults like slirp4netns/rootlesskit, every bad
// value refused with the option named; and how the library reads an older
// caller's caller-filled structs (read_versioned): the fields of its minor,
// never its padding.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "common/config.hpp"
#include "common/error.hpp"
#include "common/resolv_conf.hpp"
#include "struct_versions.hpp"

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
    CHECK(p.tcp_peek_mode == TcpPeekMode::automatic); // 1.4
    CHECK(p.udp_fast_path); // 1.5
}

TEST_CASE("default_config is RKNP_CONFIG_INIT") {
    static const rknp_config init = RKNP_CONFIG_INIT;
    rknp_config c = default_config();
    CHECK(c.struct_size == init.struct_size);
    CHECK(c.mtu == init.mtu);
    CHECK(c.handover_timeout_ms == init.handover_timeout_ms);
    CHECK(c.tcp_path == init.tcp_path);
    CHECK(c.tcp_peek_mode == init.tcp_peek_mode);
    CHECK(c.udp_path == init.udp_path);
    CHECK(c.udp_path == RKNP_UDP_PATH_DEFAULT);
}

TEST_CASE("tcp_peek_mode: each RKNP_TCP_PEEK_* value, others refused") {
    auto c = defaults();
    c.tcp_peek_mode = RKNP_TCP_PEEK_AUTO;
    CHECK(ParentConfig::from_c(c).tcp_peek_mode == TcpPeekMode::automatic);
    c.tcp_peek_mode = RKNP_TCP_PEEK_OFFSET;
    CHECK(ParentConfig::from_c(c).tcp_peek_mode == TcpPeekMode::offset);
    c.tcp_peek_mode = RKNP_TCP_PEEK_DISCARD;
    CHECK(ParentConfig::from_c(c).tcp_peek_mode == TcpPeekMode::discard);
    c.tcp_peek_mode = 3;
    CHECK(error_of(c) == "invalid tcp_peek_mode \"3\": must be "
                         "RKNP_TCP_PEEK_AUTO, _OFFSET or _DISCARD");
    c.tcp_peek_mode = 0xA5;
    CHECK(error_of(c).rfind("invalid tcp_peek_mode \"165\"", 0) == 0);
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

TEST_CASE("udp_path: the fast path unless libslirp is asked for, others refused") {
    auto c = defaults();
    for (uint8_t path : {RKNP_UDP_PATH_DEFAULT, RKNP_UDP_PATH_FAST}) {
        c.udp_path = path;
        CHECK(ParentConfig::from_c(c).udp_fast_path);
    }
    c.udp_path = RKNP_UDP_PATH_SLIRP;
    auto p = ParentConfig::from_c(c);
    CHECK_FALSE(p.udp_fast_path);
    CHECK(p.tcp_fast_path); // the two paths are chosen apart
    c.udp_path = 3;
    CHECK(error_of(c) == "invalid udp_path \"3\": must be "
                         "RKNP_UDP_PATH_DEFAULT, _FAST or _SLIRP");
    c.udp_path = 0xA5;
    CHECK(error_of(c).rfind("invalid udp_path \"165\"", 0) == 0);
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

namespace {

// A caller's struct of struct_size bytes: the first `fields` bytes from
// `set`, every other byte (padding, newer fields, past its end) `poison`.
template <typename T>
T read_poisoned(const T &set, size_t fields, uint32_t struct_size,
                unsigned char poison, const T &defaults) {
    alignas(T) unsigned char buf[sizeof(T) + 32];
    std::memset(buf, poison, sizeof buf);
    std::memcpy(buf, &set, fields);
    std::memcpy(buf, &struct_size, sizeof struct_size);
    return read_versioned(*reinterpret_cast<const T *>(buf), defaults);
}

} // namespace

TEST_CASE("1.6: the network's addresses where the caller puts them") {
    auto c = defaults();
    auto p = ParentConfig::from_c(c); // slirp4netns's layout
    CHECK(format_ipv4(p.cidr.guest()) == "10.0.2.100");
    CHECK(format_ipv4(p.cidr.gateway()) == "10.0.2.2");
    CHECK(format_ipv4(p.cidr.dns()) == "10.0.2.3");
    CHECK(format_ipv4(p.cidr.dhcp_start()) == "10.0.2.15");
    CHECK_FALSE(p.host_network);

    // Podman's pasta: the host's own address, --dns-forward 169.254.1.1,
    // --map-guest-addr 169.254.1.2, a /30 as some hosts have.
    c.cidr = "192.168.7.4/30";
    c.guest_address = "192.168.7.5";
    c.gateway = "192.168.7.6";
    c.dns_address = "169.254.1.1";
    c.map_guest_addr = "169.254.1.2";
    c.map_host_loopback = "169.254.1.3";
    c.network_model = RKNP_NETWORK_MODEL_HOST;
    p = ParentConfig::from_c(c);
    CHECK(p.host_network);
    CHECK(format_ipv4(p.cidr.guest()) == "192.168.7.5");
    CHECK(format_ipv4(p.cidr.dhcp_start()) == "192.168.7.5"); // DHCP's lease
    CHECK(format_ipv4(p.cidr.gateway()) == "192.168.7.6");
    CHECK(format_ipv4(p.cidr.dns()) == "169.254.1.1");
    CHECK(format_ipv4(*p.map_guest_addr) == "169.254.1.2");
    CHECK(format_ipv4(*p.map_host_loopback) == "169.254.1.3");

    auto bad = c;
    bad.gateway = "192.168.7.5";
    CHECK(error_of(bad) == "invalid gateway \"192.168.7.5\": the "
                           "guest_address of 192.168.7.4/30");
    bad = c;
    bad.guest_address = "192.168.7.7";
    CHECK(error_of(bad) == "invalid guest_address \"192.168.7.7\": the "
                           "broadcast address of 192.168.7.4/30");
    bad = c;
    bad.guest_address = "192.168.8.5";
    CHECK(error_of(bad) == "invalid guest_address \"192.168.8.5\": not in "
                           "192.168.7.4/30");
    bad = c;
    bad.map_guest_addr = "169.254.1.1";
    CHECK(error_of(bad) == "invalid map_guest_addr \"169.254.1.1\": the "
                           "dns_address");
    bad = c;
    bad.map_host_loopback = "127.0.0.1";
    CHECK(error_of(bad) == "invalid map_host_loopback \"127.0.0.1\": not a "
                           "unicast address");
    bad = c;
    bad.network_model = 2;
    CHECK(error_of(bad).rfind("invalid network_model \"2\"", 0) == 0);
    bad = c;
    bad.tcp_path = RKNP_TCP_PATH_SLIRP;
    CHECK(error_of(bad).find("needs the TCP fast path") != std::string::npos);
    bad = c;
    bad.disable_offload = 1;
    CHECK(error_of(bad).find("needs offloads") != std::string::npos);
    // libslirp's model: DNS inside the network, no mappings.
    bad = c;
    bad.network_model = RKNP_NETWORK_MODEL_SLIRP;
    bad.map_guest_addr = bad.map_host_loopback = nullptr;
    CHECK(error_of(bad) == "invalid dns_address \"169.254.1.1\": not in "
                           "192.168.7.4/30 (outside it needs network_model "
                           "RKNP_NETWORK_MODEL_HOST)");
    bad.dns_address = nullptr;
    CHECK(error_of(bad).find("invalid dns_address \"192.168.7.7\"") == 0);
    bad.map_guest_addr = "169.254.1.2";
    bad.dns_address = "192.168.7.6";
    CHECK(error_of(bad) == "invalid dns_address \"192.168.7.6\": the gateway "
                           "of 192.168.7.4/30");
    // A /26 keeps working with a placed guest, not with the default .100.
    auto small = defaults();
    small.cidr = "10.0.2.0/26";
    CHECK(error_of(small) == "invalid cidr \"10.0.2.0/26\": prefix length must be "
                             "1..25 for the default guest address .100 (up to 30 "
                             "with guest_address set)");
    small.guest_address = "10.0.2.10";
    CHECK_NOTHROW(ParentConfig::from_c(small));
}

TEST_CASE("an old caller's rknp_config is read as its minor: padding never") {
    rknp_config set = defaults();
    set.mtu = 1500;
    set.enable_dhcp = 1;                 // 1.2
    set.tcp_path = RKNP_TCP_PATH_SLIRP;  // 1.2
    set.max_flows = 7;                   // 1.3
    for (unsigned char poison : {0xA5, 0x01}) {
        CAPTURE(int(poison));
        { // 1.0 by its frozen size, 84
            auto r = read_poisoned(set, RKNP_CONFIG_SIZE_1_0,
                                   RKNP_CONFIG_SIZE_1_0, poison, defaults());
            CHECK(r.mtu == 1500);
            CHECK(r.enable_dhcp == 0);
            CHECK(r.tcp_path == RKNP_TCP_PATH_DEFAULT);
            CHECK(r.disable_sandbox == 0);
            CHECK(r.max_flows == 0);
        }
        { // 88, the 1.0 and 1.2 headers' sizeof, reads as 1.2
            // The issue this rule fixes: 0x01 at 86 was disable_sandbox.
            auto r = read_poisoned(set, RKNP_CONFIG_SIZE_1_2, 88, poison,
                                   defaults());
            CHECK(r.enable_dhcp == 1);
            CHECK(r.tcp_path == RKNP_TCP_PATH_SLIRP);
            CHECK(r.disable_sandbox == 0);
            CHECK(r.max_flows == 0);
            auto p = ParentConfig::from_c(r);
            CHECK(p.sandbox);
            CHECK_FALSE(p.tcp_fast_path);
        }
        { // between 1.2 and 1.3 (95): a partial 1.3 is not read
            auto r = read_poisoned(set, 95, 95, poison, defaults());
            CHECK(r.enable_dhcp == 1);
            CHECK(r.disable_sandbox == 0);
            CHECK(r.max_flows == 0);
            CHECK(r.max_new_flows_per_sec == 0);
        }
        { // 1.3, 96: its limits, not 1.4's tcp_peek_mode
            auto r = read_poisoned(set, RKNP_CONFIG_SIZE_1_3,
                                   RKNP_CONFIG_SIZE_1_3, poison, defaults());
            CHECK(r.max_flows == 7);
            CHECK(r.tcp_peek_mode == RKNP_TCP_PEEK_AUTO);
            CHECK(ParentConfig::from_c(r).tcp_peek_mode ==
                  TcpPeekMode::automatic);
        }
        { // 1.4, 104: not its reserved block, nor 1.5's udp_path after it
            rknp_config set14 = set;
            set14.tcp_peek_mode = RKNP_TCP_PEEK_DISCARD;
            set14.udp_path = RKNP_UDP_PATH_SLIRP;
            std::memset(set14.reserved_1_4, poison, sizeof set14.reserved_1_4);
            auto r = read_poisoned(set14, RKNP_CONFIG_SIZE_1_4,
                                   RKNP_CONFIG_SIZE_1_4, poison, defaults());
            CHECK(r.tcp_peek_mode == RKNP_TCP_PEEK_DISCARD);
            CHECK(r.udp_path == RKNP_UDP_PATH_DEFAULT);
            auto p = ParentConfig::from_c(r);
            CHECK(p.tcp_peek_mode == TcpPeekMode::discard);
            CHECK(p.udp_fast_path);
        }
        { // 1.5: udp_path read, its reserved block never
            rknp_config set15 = set;
            set15.udp_path = RKNP_UDP_PATH_SLIRP;
            std::memset(set15.reserved_1_5, poison, sizeof set15.reserved_1_5);
            set15.network_model = RKNP_NETWORK_MODEL_HOST;
            set15.guest_address = "10.0.2.7";
            auto r = read_poisoned(set15, RKNP_CONFIG_SIZE_1_5,
                                   RKNP_CONFIG_SIZE_1_5, poison, defaults());
            CHECK(r.udp_path == RKNP_UDP_PATH_SLIRP);
            CHECK(r.network_model == RKNP_NETWORK_MODEL_SLIRP);
            CHECK(r.guest_address == nullptr);
            CHECK_FALSE(ParentConfig::from_c(r).udp_fast_path);
        }
        { // 1.6: the address layout read, its reserved block never
            rknp_config set16 = set;
            set16.tcp_path = RKNP_TCP_PATH_DEFAULT;
            set16.network_model = RKNP_NETWORK_MODEL_HOST;
            set16.guest_address = "10.0.2.7";
            std::memset(set16.reserved_1_6, poison, sizeof set16.reserved_1_6);
            auto r = read_poisoned(set16, sizeof set16, sizeof set16, poison,
                                   defaults());
            auto p = ParentConfig::from_c(r);
            CHECK(p.host_network);
            CHECK(format_ipv4(p.cidr.guest()) == "10.0.2.7");
        }
    }
}

TEST_CASE("an old caller's rknp_child_options and rknp_forward: their minor") {
    const rknp_child_options opt_defaults = RKNP_CHILD_OPTIONS_INIT;
    rknp_child_options set = opt_defaults;
    set.link_only = 1;
    for (unsigned char poison : {0xA5, 0x01}) {
        CAPTURE(int(poison));
        auto r10 = read_poisoned(set, RKNP_CHILD_OPTIONS_SIZE_1_0,
                                 RKNP_CHILD_OPTIONS_SIZE_1_0, poison,
                                 opt_defaults);
        CHECK(r10.link_only == 0);
        // The 1.2 header's sizeof: 40 on LP64, its link_only and padding.
        auto r12 = read_poisoned(set, RKNP_CHILD_OPTIONS_SIZE_1_2,
                                 uint32_t(sizeof(rknp_child_options)), poison,
                                 opt_defaults);
        CHECK(r12.link_only == 1);
        for (uint8_t b : r12.reserved_1_2) CHECK(b == 0);

        const rknp_forward fwd_defaults = RKNP_FORWARD_INIT;
        rknp_forward fwd = fwd_defaults;
        fwd.host_port = 8080;
        fwd.guest_port = 80;
        fwd.struct_size = RKNP_FORWARD_SIZE_1_1; // a 1.1 caller's sizeof
        auto rf = read_poisoned(fwd, RKNP_FORWARD_SIZE_1_1,
                                RKNP_FORWARD_SIZE_1_1, poison, fwd_defaults);
        CHECK(std::memcmp(&rf, &fwd, sizeof fwd) == 0);
        // 1.7's flags and handoff_fd: read at their frozen size, not below.
        fwd.flags = RKNP_FORWARD_HANDOFF_LOOPBACK;
        fwd.handoff_fd = 7;
        auto rf7 = read_poisoned(fwd, RKNP_FORWARD_SIZE_1_7,
                                 RKNP_FORWARD_SIZE_1_7, poison, fwd_defaults);
        CHECK(rf7.flags == RKNP_FORWARD_HANDOFF_LOOPBACK);
        CHECK(rf7.handoff_fd == 7);
        auto rf1 = read_poisoned(fwd, RKNP_FORWARD_SIZE_1_1,
                                 RKNP_FORWARD_SIZE_1_1, poison, fwd_defaults);
        CHECK(rf1.flags == 0);
        CHECK(rf1.handoff_fd == 0);
    }
}

TEST_CASE("field_bytes: the newest frozen size within struct_size") {
    CHECK_THROWS_AS(field_bytes<rknp_config>(RKNP_CONFIG_SIZE_1_0 - 1), Error);
    CHECK(field_bytes<rknp_config>(RKNP_CONFIG_SIZE_1_0) ==
          RKNP_CONFIG_SIZE_1_0);
    CHECK(field_bytes<rknp_config>(RKNP_CONFIG_SIZE_1_2 - 1) ==
          RKNP_CONFIG_SIZE_1_0);
    CHECK(field_bytes<rknp_config>(RKNP_CONFIG_SIZE_1_3 - 1) ==
          RKNP_CONFIG_SIZE_1_2);
    CHECK(field_bytes<rknp_config>(RKNP_CONFIG_SIZE_1_4) ==
          RKNP_CONFIG_SIZE_1_4);
    CHECK(field_bytes<rknp_config>(RKNP_CONFIG_SIZE_1_5 - 1) ==
          RKNP_CONFIG_SIZE_1_4);
    CHECK(field_bytes<rknp_config>(RKNP_CONFIG_SIZE_1_5) ==
          RKNP_CONFIG_SIZE_1_5);
    CHECK(field_bytes<rknp_config>(4096) == sizeof(rknp_config));
    CHECK(field_bytes<rknp_stats>(RKNP_STATS_SIZE_1_3 + 4) ==
          RKNP_STATS_SIZE_1_3);
    CHECK(field_bytes<rknp_stats>(RKNP_STATS_SIZE_1_5 - 8) ==
          RKNP_STATS_SIZE_1_4);
    CHECK(field_bytes<rknp_stats>(RKNP_STATS_SIZE_1_5) ==
          RKNP_STATS_SIZE_1_5);
}

TEST_CASE("resolv.conf: the first IPv4 nameserver, comments and IPv6 skipped") {
    CHECK(first_nameserver4("# nameserver 9.9.9.9\n; x\nsearch lan\n"
                            "nameserver fd00::1\nnameserver   127.0.0.53 \n"
                            "nameserver 10.0.0.1\n") == 0x7f000035u);
    CHECK_FALSE(first_nameserver4("nameserver ::1\noptions edns0\n"));
    CHECK_FALSE(first_nameserver4(""));
    CHECK_FALSE(host_nameserver4("/nonexistent/resolv.conf"));
}

TEST_CASE("resolv.conf: for IPv6 DNS the first IPv6 nameserver, else the IPv4 one") {
    auto text = [](const std::optional<in6_addr> &a) {
        return a ? format_ipv6(*a) : std::string("none");
    };
    CHECK(text(first_nameserver6("# nameserver fd00::9\nnameserver 10.0.0.1\n"
                                 "nameserver fe80::1\nnameserver ::1\n")) == "::1");
    CHECK(text(first_nameserver6("nameserver 2001:db8::53\n")) == "2001:db8::53");
    // No usable IPv6 one: the first IPv4 one, as an IPv6 socket reaches it.
    CHECK(text(first_nameserver6("nameserver fe80::1%eth0\nnameserver fe80::1\n"
                                 "nameserver 127.0.0.53\n")) == "::ffff:127.0.0.53");
    CHECK(text(first_nameserver6("search lan\n")) == "none");
    CHECK_FALSE(host_nameserver6("/nonexistent/resolv.conf"));
}
