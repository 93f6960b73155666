// SPDX-License-Identifier: Apache-2.0

// The parent's validated configuration, from rknp_config, and the defaults
// both sides share (MTU range, IPv6 prefix, gateway and DNS addresses).
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <optional>
#include <string>

#include "common/addr.hpp"
#include "common/log.hpp"
#include "rknp.h"

namespace rknp {

inline constexpr uint32_t kMtuMin = 68;
inline constexpr uint32_t kMtuMax = 65520;
inline constexpr uint32_t kIpv6MtuMin = 1280;
inline constexpr uint32_t kDefaultMtu = 65520;
inline constexpr const char *kDefaultCidr = "10.0.2.0/24";
inline constexpr const char *kDefaultIfname = "tap0";
inline constexpr uint32_t kDefaultHandoverTimeoutMs = 10000;
inline constexpr const char *kIpv6Prefix = "fd00::";
inline constexpr uint32_t kIpv6PrefixLen = 64;
inline constexpr const char *kIpv6Gateway = "fd00::2";
inline constexpr const char *kIpv6Dns = "fd00::3";
inline constexpr uint32_t kDefaultMaxFlows = 16384;
inline constexpr uint32_t kDefaultMaxNewFlowsPerSec = 20000;
inline constexpr uint32_t kMaxFlowsLimit = 1u << 20;

// rknp_config.tcp_peek_mode: how the TCP fast path peeks at a host socket
// the data the guest has not acknowledged yet (rknp.h, RKNP_TCP_PEEK_*).
enum class TcpPeekMode : uint8_t {
    automatic = RKNP_TCP_PEEK_AUTO, // offset where the kernel has
                                    // SO_PEEK_OFF for TCP, else discard
    offset = RKNP_TCP_PEEK_OFFSET,  // SO_PEEK_OFF (Linux >= 6.9); start
                                    // fails without it
    discard = RKNP_TCP_PEEK_DISCARD // peek from the queue's start, the
                                    // bytes already sent into a discard
                                    // buffer
};

// 1.7: pasta's model for IPv6 (ParentConfig::host_network with
// ipv6_network): the host's IPv6 network, whose other addresses are the
// host's neighbours; the guest's address is ParentConfig::ipv6_address.
struct Ipv6HostNetwork {
    Ipv6Prefix prefix;
    in6_addr gateway{}; // in prefix, or link-local
    std::optional<in6_addr> map_guest;    // -> the host at the guest's address
    std::optional<in6_addr> map_loopback; // -> the host's ::1
    std::optional<in6_addr> dns; // DNS to it -> the host's resolver (1.7)
};

struct ParentConfig {
    uint32_t mtu = kDefaultMtu;
    Ipv4Cidr cidr;
    std::string ifname = kDefaultIfname;
    bool disable_host_loopback = false;
    bool ipv6 = false;
    bool disable_dns = false;
    bool enable_dhcp = false;
    // 1.6: cidr's other addresses are the host's neighbours (pasta's
    // model), and the extra addresses that reach the host.
    bool host_network = false;
    std::optional<uint32_t> map_guest_addr;    // -> the host at cidr.guest()
    std::optional<uint32_t> map_host_loopback; // -> the host's 127.0.0.1
    bool tcp_fast_path = true; // RKNP_TCP_PATH_DEFAULT / _FAST
    TcpPeekMode tcp_peek_mode = TcpPeekMode::automatic;
    bool udp_fast_path = true; // RKNP_UDP_PATH_DEFAULT / _FAST (1.5)
    bool offload = true;
    std::optional<in6_addr> ipv6_address;
    // 1.7: IPv6 in pasta's model (libslirp's IPv6 is off), and IPv6 alone.
    std::optional<Ipv6HostNetwork> ipv6_host;
    bool disable_ipv4 = false;
    std::optional<uint32_t> outbound_addr;
    std::optional<in6_addr> outbound_addr6;
    std::optional<Mac> mac;
    uint32_t handover_timeout_ms = kDefaultHandoverTimeoutMs;
    bool sandbox = true;
    // As configured (0 taken as the default); the parent lowers max_flows
    // to its file descriptor limit when it starts.
    uint32_t max_flows = kDefaultMaxFlows;
    uint32_t max_new_flows_per_sec = kDefaultMaxNewFlowsPerSec;
    Logger logger;

    // Validates every field of a whole rknp_config (read_versioned gives
    // one); throws Error(RKNP_ERR_INVALID_ARGUMENT).
    static ParentConfig from_c(const rknp_config &c);
};

// rknp_config with every default, struct_size = sizeof(rknp_config).
rknp_config default_config();

} // namespace rknp
