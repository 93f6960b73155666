// SPDX-License-Identifier: Apache-2.0

// rknp-pasta's -t/-u port specs: every form of pasta's man page, and the errors.
#include <doctest/doctest.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "cmd/common/port_spec.hpp"

using cmd::parse_port_spec;
using cmd::PortMapping;
using cmd::PortMode;
using cmd::PortRange;
using cmd::PortSpec;
using cmd::PortSpecError;

namespace doctest {
template <> struct StringMaker<PortMapping> {
    static String convert(const PortMapping &m) {
        return (std::to_string(m.host) + ":" + std::to_string(m.guest)).c_str();
    }
};
} // namespace doctest

namespace {

// host..last forwarded to themselves.
std::vector<PortMapping> same(unsigned first, unsigned last) {
    std::vector<PortMapping> v;
    for (unsigned p = first; p <= last; p++) v.push_back({uint16_t(p), uint16_t(p)});
    return v;
}

bool has_host(const PortSpec &s, unsigned port) {
    for (const PortMapping &m : s.mappings)
        if (m.host == port) return m.guest == port;
    return false;
}

bool ascending(const PortSpec &s) {
    for (size_t i = 1; i < s.mappings.size(); i++)
        if (s.mappings[i - 1].host >= s.mappings[i].host) return false;
    return true;
}

// The message of the PortSpecError spec throws; "" when it parses.
std::string error_of(std::string_view spec, PortRange ephemeral = {}) {
    try {
        parse_port_spec(spec, ephemeral);
    } catch (const PortSpecError &e) {
        return e.what();
    }
    return "";
}

// spec is refused with a message that quotes it and contains why.
void check_refused(std::string_view spec, std::string_view why,
                   PortRange ephemeral = {}) {
    std::string msg = error_of(spec, ephemeral);
    INFO("spec: ", std::string(spec), " message: ", msg);
    CHECK(msg.find("'" + std::string(spec) + "'") != std::string::npos);
    CHECK(msg.find(why) != std::string::npos);
}

} // namespace

TEST_CASE("pasta port spec: none and auto") {
    PortSpec none = parse_port_spec("none");
    CHECK(none.mode == PortMode::none);
    CHECK(none.mappings.empty());
    CHECK(none.address.empty());
    CHECK(none.ifname.empty());

    PortSpec autom = parse_port_spec("auto");
    CHECK(autom.mode == PortMode::automatic);
    CHECK(autom.mappings.empty());
}

TEST_CASE("pasta port spec: single ports, mappings and ranges") {
    PortSpec s = parse_port_spec("22");
    CHECK(s.mode == PortMode::list);
    CHECK(s.address.empty());
    CHECK(s.ifname.empty());
    CHECK(s.mappings == std::vector<PortMapping>{{22, 22}});

    CHECK(parse_port_spec("22:23").mappings == std::vector<PortMapping>{{22, 23}});
    CHECK(parse_port_spec("22,25").mappings ==
          std::vector<PortMapping>{{22, 22}, {25, 25}});
    CHECK(parse_port_spec("22-80").mappings == same(22, 80));

    PortSpec r = parse_port_spec("22-80:32-90");
    REQUIRE(r.mappings.size() == 59);
    CHECK(r.mappings.front() == PortMapping{22, 32});
    CHECK(r.mappings[8] == PortMapping{30, 40});
    CHECK(r.mappings.back() == PortMapping{80, 90});
    for (const PortMapping &m : r.mappings) CHECK(m.guest == m.host + 10);

    // Podman's form: a one-port range mapped to a one-port range.
    CHECK(parse_port_spec("18596-18596:80-80").mappings ==
          std::vector<PortMapping>{{18596, 80}});
    // The ends of the port space.
    CHECK(parse_port_spec("1,65535").mappings ==
          std::vector<PortMapping>{{1, 1}, {65535, 65535}});
    CHECK(parse_port_spec("65535:1").mappings ==
          std::vector<PortMapping>{{65535, 1}});
}

TEST_CASE("pasta port spec: mappings come out in ascending host order") {
    PortSpec s = parse_port_spec("8080:80,22,443-444:8443-8444,22");
    CHECK(s.mappings == std::vector<PortMapping>{
                            {22, 22}, {443, 8443}, {444, 8444}, {8080, 80}});
    // Overlapping items that agree are one forward.
    CHECK(parse_port_spec("20-30,25-35").mappings == same(20, 35));
    CHECK(ascending(parse_port_spec("900-1000,10-20,500")));
}

TEST_CASE("pasta port spec: an address and an interface") {
    PortSpec a = parse_port_spec("192.0.2.1/22");
    CHECK(a.mode == PortMode::list);
    CHECK(a.address == "192.0.2.1");
    CHECK(a.ifname.empty());
    CHECK(a.mappings == std::vector<PortMapping>{{22, 22}});

    PortSpec ai = parse_port_spec("192.0.2.1%eth0/22");
    CHECK(ai.address == "192.0.2.1");
    CHECK(ai.ifname == "eth0");
    CHECK(ai.mappings == std::vector<PortMapping>{{22, 22}});

    PortSpec i = parse_port_spec("%lo/80");
    CHECK(i.address.empty());
    CHECK(i.ifname == "lo");
    CHECK(i.mappings == std::vector<PortMapping>{{80, 80}});

    // A 15-character name is the longest Linux allows.
    CHECK(parse_port_spec("%abcdefghijklmno/80").ifname == "abcdefghijklmno");
}

TEST_CASE("pasta port spec: IPv6 addresses, bracketed or not") {
    PortSpec bare = parse_port_spec("::1/8080");
    CHECK(bare.address == "::1");
    CHECK(bare.mappings == std::vector<PortMapping>{{8080, 8080}});

    PortSpec br = parse_port_spec("[::1]/8080");
    CHECK(br.address == "::1"); // stored without the brackets
    CHECK(br.mappings == std::vector<PortMapping>{{8080, 8080}});

    PortSpec scoped = parse_port_spec("fe80::1%eth0/22:2222");
    CHECK(scoped.address == "fe80::1");
    CHECK(scoped.ifname == "eth0");
    CHECK(scoped.mappings == std::vector<PortMapping>{{22, 2222}});

    PortSpec scoped_br = parse_port_spec("[2001:db8::5]%eth1/80-81");
    CHECK(scoped_br.address == "2001:db8::5");
    CHECK(scoped_br.ifname == "eth1");
    CHECK(scoped_br.mappings == same(80, 81));
}

TEST_CASE("pasta port spec: exclusions within a list") {
    PortSpec s = parse_port_spec("2000-5000,~3000-3010");
    CHECK(s.mappings.size() == 3001 - 11);
    CHECK(has_host(s, 2000));
    CHECK(has_host(s, 2999));
    CHECK_FALSE(has_host(s, 3000));
    CHECK_FALSE(has_host(s, 3005));
    CHECK_FALSE(has_host(s, 3010));
    CHECK(has_host(s, 3011));
    CHECK(has_host(s, 5000));
    CHECK_FALSE(has_host(s, 1999));
    CHECK_FALSE(has_host(s, 5001));
    CHECK(ascending(s));

    PortSpec a = parse_port_spec("192.0.2.1/20-30,~25");
    CHECK(a.address == "192.0.2.1");
    std::vector<PortMapping> want = same(20, 24);
    for (PortMapping m : same(26, 30)) want.push_back(m);
    CHECK(a.mappings == want);

    // An exclusion written first applies just the same.
    CHECK(parse_port_spec("~25,20-30").mappings == want);
    // Exclusions name host ports, whatever guest port they map to.
    CHECK(parse_port_spec("80-82:8080-8082,~81").mappings ==
          std::vector<PortMapping>{{80, 8080}, {82, 8082}});
    // An included list leaves the ephemeral range alone: named is named.
    CHECK(parse_port_spec("40000", PortRange{32768, 60999}).mappings ==
          std::vector<PortMapping>{{40000, 40000}});
}

TEST_CASE("pasta port spec: only exclusions forward every other port but "
          "the ephemeral range") {
    PortSpec s = parse_port_spec("~20000-20010"); // default 32768-60999
    CHECK(s.mode == PortMode::list);
    // 65535 ports, less the 11 excluded and the 28232 ephemeral ones.
    CHECK(s.mappings.size() == 65535 - 11 - (60999 - 32768 + 1));
    CHECK(s.mappings.front() == PortMapping{1, 1});
    CHECK(s.mappings.back() == PortMapping{65535, 65535});
    CHECK(has_host(s, 19999));
    CHECK_FALSE(has_host(s, 20000));
    CHECK_FALSE(has_host(s, 20010));
    CHECK(has_host(s, 20011));
    CHECK(has_host(s, 32767));
    CHECK_FALSE(has_host(s, 32768));
    CHECK_FALSE(has_host(s, 45000));
    CHECK_FALSE(has_host(s, 60999));
    CHECK(has_host(s, 61000));
    CHECK(ascending(s));

    // The host's own range, as read from ip_local_port_range.
    PortSpec custom = parse_port_spec("~22", PortRange{1024, 65535});
    CHECK(custom.mappings.size() == 1022);
    CHECK(custom.mappings.front() == PortMapping{1, 1});
    CHECK(custom.mappings.back() == PortMapping{1023, 1023});
    CHECK_FALSE(has_host(custom, 22));

    // With an address too.
    PortSpec addr = parse_port_spec("192.0.2.1/~1-1000", PortRange{2000, 65535});
    CHECK(addr.address == "192.0.2.1");
    CHECK(addr.mappings == same(1001, 1999));
}

TEST_CASE("pasta port spec: bad port numbers and ranges") {
    check_refused("0", "port 0 is not in 1-65535");
    check_refused("65536", "port 65536 is not in 1-65535");
    check_refused("99999999999", "not a port number");
    check_refused("80-22", "range 80-22 ends before it starts");
    check_refused("22-80:30-31", "maps ranges of different sizes");
    check_refused("22:30-31", "maps ranges of different sizes");
    check_refused("abc", "'abc' is not a port number");
    check_refused("22x", "'22x' is not a port number");
    check_refused("-22", "'' is not a port number");
    check_refused("22-", "'' is not a port number");
    check_refused("22:", "'' is not a port number");
    check_refused(":22", "'' is not a port number");
    check_refused("1-2-3", "'2-3' is not a port number");
    check_refused("~", "'' is not a port number");
    check_refused("~0", "port 0 is not in 1-65535");
    check_refused("+22", "not a port number");
    check_refused(" 22", "not a port number");
}

TEST_CASE("pasta port spec: bad lists") {
    check_refused("", "no ports");
    check_refused("22,,23", "empty item in the port list");
    check_refused(",22", "empty item in the port list");
    check_refused("22,", "empty item in the port list");
    check_refused("all", "'all' is passt's");
    // One host port, two guest ports.
    check_refused("80:81,80:82", "port 80 is mapped to two guest ports");
    check_refused("80-90,85:86", "port 85 is mapped to two guest ports");
    // Nothing left to forward.
    check_refused("22,~22", "it excludes every port it names");
    check_refused("20-30,~1-100", "it excludes every port it names");
}

TEST_CASE("pasta port spec: exclusions that leave nothing outside the "
          "ephemeral range are refused") {
    // Every port but the excluded is ephemeral: the spec forwards nothing,
    // an error rather than a forward that silently does nothing.
    check_refused("~1", "no port outside its exclusions and the ephemeral range",
                  PortRange{2, 65535});
    check_refused("~65535", "no port outside its exclusions",
                  PortRange{1, 65534});
    check_refused("~1-1023", "no port outside its exclusions",
                  PortRange{1024, 65535});
    // A range of every port covers 22 too.
    check_refused("~22", "no port outside its exclusions", PortRange{1, 65535});
    // One port left over is enough.
    CHECK(parse_port_spec("~22", PortRange{24, 65535}).mappings ==
          std::vector<PortMapping>{{1, 1},   {2, 2},   {3, 3},   {4, 4},
                                   {5, 5},   {6, 6},   {7, 7},   {8, 8},
                                   {9, 9},   {10, 10}, {11, 11}, {12, 12},
                                   {13, 13}, {14, 14}, {15, 15}, {16, 16},
                                   {17, 17}, {18, 18}, {19, 19}, {20, 20},
                                   {21, 21}, {23, 23}});
}

TEST_CASE("pasta port spec: bad addresses and interfaces") {
    check_refused("1.2.3.400/80", "'1.2.3.400' is not an IPv4 or IPv6 address");
    check_refused("/80", "empty address before '/'");
    check_refused("[]/80", "empty address before '/'");
    check_refused("[::1/80", "'[::1' is not an IPv4 or IPv6 address");
    check_refused("example.org/80", "is not an IPv4 or IPv6 address");
    check_refused("192.0.2.1/", "no ports");
    check_refused("%/80", "bad interface name ''");
    check_refused("%abcdefghijklmnop/80", "bad interface name 'abcdefghijklmnop'");
    check_refused("192.0.2.1/80/81", "'80/81' is not a port number");
    check_refused("192.0.2.1/auto", "'auto' is not supported");
    check_refused("192.0.2.1/none", "'none' is not a port number");
    // An IPv6 address without its '/' reads as ports.
    check_refused("::1", "not a port number");
}

TEST_CASE("pasta port spec: errors are PortSpecError, a runtime_error") {
    CHECK_THROWS_AS(parse_port_spec("0"), PortSpecError);
    CHECK_THROWS_AS(parse_port_spec("1.2.3.400/80"), std::runtime_error);
    CHECK_THROWS_WITH(parse_port_spec("80-22"),
                      "invalid port specifier '80-22': range 80-22 ends "
                      "before it starts");
    CHECK_NOTHROW(parse_port_spec("22"));
}

TEST_CASE("pasta port spec: a target address in the namespace") {
    // Podman 6's pesto for a container on a bridge network behind the
    // rootless network namespace.
    PortSpec p = parse_port_spec("0.0.0.0/18092:10.89.0.2/8000");
    CHECK(p.mode == PortMode::list);
    CHECK(p.address == "0.0.0.0");
    CHECK(p.target == "10.89.0.2");
    CHECK(p.mappings == std::vector<PortMapping>{{18092, 8000}});

    // No host address: the first '/' belongs to the target.
    PortSpec bare = parse_port_spec("8080:10.89.0.2/80");
    CHECK(bare.address.empty());
    CHECK(bare.target == "10.89.0.2");
    CHECK(bare.mappings == std::vector<PortMapping>{{8080, 80}});

    // IPv6 targets, bracketed or not, and ranges.
    PortSpec v6 = parse_port_spec("[::]/18092-18093:[fd00:1::2]/8000-8001");
    CHECK(v6.address == "::");
    CHECK(v6.target == "fd00:1::2");
    CHECK(v6.mappings == std::vector<PortMapping>{{18092, 8000}, {18093, 8001}});
    CHECK(parse_port_spec("::/80:fd00:1::2/8080").target == "fd00:1::2");
    CHECK(parse_port_spec("8080:[fd00:1::2]/80").target == "fd00:1::2");
    // Unbracketed and without a host address it reads as one: "8080:fd00::2"
    // is an IPv6 address itself (pasta's syntax has the same ambiguity).
    CHECK(parse_port_spec("8080:fd00::2/80").address == "8080:fd00::2");

    // Items that agree on the target, exclusions beside them.
    PortSpec two = parse_port_spec("80:10.89.0.2/8080,81:10.89.0.2/8081,~82");
    CHECK(two.target == "10.89.0.2");
    CHECK(two.mappings == std::vector<PortMapping>{{80, 8080}, {81, 8081}});

    // Without one, target stays empty.
    CHECK(parse_port_spec("0.0.0.0/80:8080").target.empty());
}

TEST_CASE("pasta port spec: bad target addresses") {
    check_refused("0.0.0.0/80:10.89.0.300/80",
                  "target '10.89.0.300' is not an IPv4 or IPv6 address");
    check_refused("0.0.0.0/80:/80", "empty target address before '/'");
    check_refused("0.0.0.0/80:[]/80", "empty target address before '/'");
    check_refused("0.0.0.0/80:example.org/80", "is not an IPv4 or IPv6 address");
    check_refused("0.0.0.0/80:10.89.0.2/", "is not a port number");
    check_refused("0.0.0.0/80:10.89.0.2%eth0/80", "is not an IPv4 or IPv6 address");
    // One target a spec, and none beside one.
    check_refused("80:10.89.0.2/80,81:10.89.0.3/81", "different target addresses");
    check_refused("80:10.89.0.2/80,81", "different target addresses");
    check_refused("81,80:10.89.0.2/80", "different target addresses");
    check_refused("80:81,82:10.89.0.2/82", "different target addresses");
}
