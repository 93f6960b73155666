// The tap hand-over between the child side and the parent side.
//
// The parent listens on a SOCK_SEQPACKET unix socket in rootlesskit's state
// directory. The child connects, sends one Hello message carrying the tap fd
// (SCM_RIGHTS) and waits for one Reply. The parent checks the peer's
// credentials (SO_PEERCRED: pid must be the rootlesskit child, uid the
// parent's own) and that the fd is the tap named in the Hello before it
// accepts. Message layouts are fixed-size little-endian byte strings so the
// parser is trivial to fuzz.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "fd.hpp"
#include "rknp.h"

namespace rknp::handover {

inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kHelloSize = 24;   // magic 4, version 2, rsvd 2, name 16
inline constexpr size_t kReplyMax = 4 + 4 + 2 + 256;
inline constexpr size_t kReplyMessageMax = 256;

using Hello = std::array<uint8_t, kHelloSize>;

Hello encode_hello(const std::string &ifname);
// Returns the interface name; throws Error(RKNP_ERR_PROTOCOL).
std::string decode_hello(std::span<const uint8_t> msg);

std::string encode_reply(rknp_status status, const std::string &message);
struct Reply {
    rknp_status status = RKNP_OK;
    std::string message;
};
Reply decode_reply(std::span<const uint8_t> msg);

// Parent: a listening socket at path (stale files are replaced).
UniqueFd listen_socket(const std::string &path);

struct Accepted {
    UniqueFd tap;
    std::string ifname;
    bool vnet_hdr = false; // opened with IFF_VNET_HDR
};
// Parent: accepts one pending connection on listen_fd, checks the peer and
// the fd, hands the tap to adopt (which may throw to refuse it) and only
// then replies OK, so the child returns once the tap is in use. Throws
// Error on refusal (the peer has been told why). Waits at most timeout_ms
// for the Hello.
void accept_tap(int listen_fd, pid_t expected_pid, uid_t expected_uid,
                int timeout_ms, const std::function<void(Accepted &&)> &adopt);

// Child: hands tap_fd over and waits for the parent's verdict.
void send_tap(const std::string &path, int tap_fd, const std::string &ifname,
              int timeout_ms);

} // namespace rknp::handover
