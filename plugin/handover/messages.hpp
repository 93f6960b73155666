// The hand-over's two messages, child -> parent Hello (with the tap fd) and
// parent -> child Reply: fixed-size little-endian byte strings, so the
// parser is trivial to fuzz.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

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
// Throws Error(RKNP_ERR_PROTOCOL).
Reply decode_reply(std::span<const uint8_t> msg);

// Throws Error(RKNP_ERR_PROTOCOL) with "hand-over: " + msg.
[[noreturn]] void protocol_error(const std::string &msg);

} // namespace rknp::handover
