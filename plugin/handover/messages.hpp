// SPDX-License-Identifier: Apache-2.0

// The hand-over's wire format: parent -> child Greeting (proves the parent),
// child -> parent Hello (proves the child, carries the tap fd), parent ->
// child Reply; fixed-size little-endian byte strings, so the parsers are
// trivial to fuzz. Also the tokens both proofs use.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "rknp.h"

namespace rknp::handover {

inline constexpr uint16_t kVersion = 2;
inline constexpr size_t kTokenSize = 16;
// magic 4, version 2, rsvd 2, parent token 16
inline constexpr size_t kGreetingSize = 8 + kTokenSize;
// magic 4, version 2, rsvd 2, name 16, child token 16
inline constexpr size_t kHelloSize = 24 + kTokenSize;
inline constexpr size_t kReplyMax = 4 + 4 + 2 + 256;
inline constexpr size_t kReplyMessageMax = 256;

// A secret shared through the opaque key/values only: the parent's proves
// the socket is the parent's before the child sends its tap, the child's
// proves the peer is the child (on top of SO_PEERCRED).
using Token = std::array<uint8_t, kTokenSize>;
struct Tokens {
    Token parent{};
    Token child{};
};
// From getrandom(2); throws Error(RKNP_ERR_SYSTEM).
Token random_token();
Tokens random_tokens();
// Lowercase hex, 32 characters.
std::string format_token(const Token &t);
// Throws Error(RKNP_ERR_INVALID_ARGUMENT) naming key.
Token parse_token(const char *key, const std::string &hex);
// Compares in time independent of where the tokens differ.
bool tokens_equal(std::span<const uint8_t> a, const Token &b);

using Greeting = std::array<uint8_t, kGreetingSize>;
Greeting encode_greeting(const Token &parent_token);
// True if msg has a greeting's size and magic (anything else is a Reply or
// garbage).
bool is_greeting(std::span<const uint8_t> msg);
// Returns the token; throws Error(RKNP_ERR_PROTOCOL).
Token decode_greeting(std::span<const uint8_t> msg);

using Hello = std::array<uint8_t, kHelloSize>;
Hello encode_hello(const std::string &ifname, const Token &child_token);
struct DecodedHello {
    std::string ifname;
    Token token{};
};
// Throws Error(RKNP_ERR_PROTOCOL).
DecodedHello decode_hello(std::span<const uint8_t> msg);

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
