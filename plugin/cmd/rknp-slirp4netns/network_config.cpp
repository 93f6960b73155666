// SPDX-License-Identifier: Apache-2.0

// Translates slirp4netns options (CIDR, MTU, MAC, outbound address or
// interface name, ...) into an rknp_config, with slirp4netns' messages.
#include "network_config.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstdio>
#include <memory>

#include "cmd/common/errors.hpp"

namespace s4n {

namespace {

constexpr const char *kDefaultCidr = "10.0.2.0/24";
constexpr int kPrefixMin = 1, kPrefixMax = 25; // guest is network + 100
constexpr uint32_t kRknpMtuMax = 65520;
constexpr uint32_t kGuestOffset = 100;

bool all_digits(const std::string &s) {
    if (s.empty()) return false;
    for (char c : s)
        if (c < '0' || c > '9') return false;
    return true;
}

// "A.B.C.D/N" as slirp4netns checks it; returns the network (host order).
uint32_t parse_cidr(const std::string &cidr, int &prefix) {
    auto slash = cidr.find('/');
    std::string net = cidr.substr(0, slash);
    std::string len = slash == std::string::npos ? "" : cidr.substr(slash + 1);
    int dots = 0;
    for (char c : net) dots += c == '.';
    if (slash == std::string::npos || dots != 3 || !all_digits(len) ||
        len.size() > 2 || net.size() > 15)
        throw cmd::Failure("invalid CIDR: " + cidr);
    in_addr a{};
    if (inet_pton(AF_INET, net.c_str(), &a) != 1)
        throw cmd::Failure("invalid network address: " + net);
    prefix = std::stoi(len);
    if (prefix < kPrefixMin || prefix > kPrefixMax)
        throw cmd::Failure("prefix length needs to be " + std::to_string(kPrefixMin) +
                      "-" + std::to_string(kPrefixMax));
    uint32_t host = ntohl(a.s_addr);
    uint32_t mask = ~((uint32_t(1) << (32 - prefix)) - 1);
    if ((host & mask) != host)
        throw cmd::Failure("CIDR needs to be a network address like 10.0.2.0/24, "
                      "not like 10.0.2.100/24");
    return host;
}

std::string format_ipv4(uint32_t host_order) {
    in_addr a{htonl(host_order)};
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a, buf, sizeof buf);
    return buf;
}

// "xx:xx:xx:xx:xx:xx" (1-2 hex digits per byte) in canonical form.
std::string parse_mac(const std::string &s) {
    unsigned b[6];
    char tail;
    if (std::sscanf(s.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1],
                    &b[2], &b[3], &b[4], &b[5], &tail) != 6)
        throw cmd::Failure("\"" + s + "\" is an invalid MAC address.\n"
                      "macaddress has to be a valid MAC address (hex string, "
                      "6 bytes, each byte separated by a ':').");
    char out[18];
    std::snprintf(out, sizeof out, "%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1],
                  b[2], b[3], b[4], b[5]);
    return out;
}

// An address literal of family af, or the first such address of the
// interface of that name (slirp4netns accepts both).
std::string address_or_interface(const std::string &v, int af,
                                 const char *message) {
    unsigned char buf[sizeof(in6_addr)];
    if (inet_pton(af, v.c_str(), buf) == 1) return v;
    ifaddrs *list = nullptr;
    if (getifaddrs(&list) < 0) throw cmd::sys_failure("getifaddrs");
    std::unique_ptr<ifaddrs, void (*)(ifaddrs *)> guard(list, freeifaddrs);
    for (ifaddrs *i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr || !i->ifa_name || i->ifa_addr->sa_family != af ||
            v != i->ifa_name)
            continue;
        char text[INET6_ADDRSTRLEN];
        const void *src =
            af == AF_INET
                ? static_cast<const void *>(
                      &reinterpret_cast<sockaddr_in *>(i->ifa_addr)->sin_addr)
                : static_cast<const void *>(
                      &reinterpret_cast<sockaddr_in6 *>(i->ifa_addr)->sin6_addr);
        inet_ntop(af, src, text, sizeof text);
        return text;
    }
    throw cmd::Failure(message);
}

} // namespace

NetworkConfig::NetworkConfig(const Options &o) {
    rknp_status st = rknp_config_init(&cfg_, sizeof cfg_);
    if (st != RKNP_OK) throw cmd::Failure("rknp_config_init failed");
    int prefix = 0;
    cidr_ = o.cidr.value_or(kDefaultCidr);
    guest_ = format_ipv4(parse_cidr(cidr_, prefix) + kGuestOffset);
    cfg_.cidr = cidr_.c_str();
    if (o.mtu > kRknpMtuMax) {
        std::printf("WARNING: MTU %u is above rknp's maximum, using %u\n", o.mtu,
                    kRknpMtuMax);
        cfg_.mtu = kRknpMtuMax;
    } else {
        cfg_.mtu = o.mtu;
    }
    ifname_ = o.tapname;
    cfg_.ifname = ifname_.c_str();
    cfg_.disable_host_loopback = o.disable_host_loopback;
    cfg_.enable_ipv6 = o.enable_ipv6;
    cfg_.disable_dns = o.disable_dns;
    if (o.outbound_addr) {
        outbound_ = address_or_interface(
            *o.outbound_addr, AF_INET,
            "outbound-addr has to be valid ipv4 address or interface name.");
        cfg_.outbound_addr = outbound_.c_str();
    }
    if (o.outbound_addr6) {
        outbound6_ = address_or_interface(
            *o.outbound_addr6, AF_INET6,
            "outbound-addr6 has to be valid ipv6 address or interface name.");
        cfg_.outbound_addr6 = outbound6_.c_str();
    }
    if (o.macaddress) {
        mac_ = parse_mac(*o.macaddress);
        cfg_.mac_address = mac_.c_str();
    }
    // slirp4netns runs libslirp's DHCP server (leases from .15); rknp's is
    // off unless asked for (ABI 1.2).
    if ((rknp_abi_version() & 0xffff) >= 2) cfg_.enable_dhcp = 1;
}

} // namespace s4n
