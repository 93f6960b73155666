// SPDX-License-Identifier: Apache-2.0

// Tokens, and encoding and strict decoding of the hand-over's Greeting,
// Hello and Reply.
#include "handover/messages.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"

namespace rknp::handover {

namespace {

constexpr uint8_t kHelloMagic[4] = {'R', 'K', 'N', 'H'};
constexpr uint8_t kReplyMagic[4] = {'R', 'K', 'N', 'R'};
constexpr uint8_t kGreetingMagic[4] = {'R', 'K', 'N', 'G'};

void put16(uint8_t *p, uint16_t v) {
    p[0] = uint8_t(v);
    p[1] = uint8_t(v >> 8);
}
uint16_t get16(const uint8_t *p) { return uint16_t(p[0] | (p[1] << 8)); }
void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
uint32_t get32(const uint8_t *p) {
    return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
           uint32_t(p[3]) << 24;
}

} // namespace

void protocol_error(const std::string &msg) {
    throw Error(RKNP_ERR_PROTOCOL, "hand-over: " + msg);
}

Token random_token() {
    Token t{};
    size_t got = 0;
    while (got < t.size()) {
        ssize_t n = ::getrandom(t.data() + got, t.size() - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw_errno("hand-over: getrandom");
        got += size_t(n);
    }
    return t;
}

Tokens random_tokens() { return Tokens{random_token(), random_token()}; }

std::string format_token(const Token &t) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string s;
    s.reserve(2 * t.size());
    for (uint8_t b : t) {
        s += kHex[b >> 4];
        s += kHex[b & 15];
    }
    return s;
}

Token parse_token(const char *key, const std::string &hex) {
    auto nibble = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        return -1;
    };
    Token t{};
    bool ok = hex.size() == 2 * t.size();
    for (size_t i = 0; ok && i < t.size(); ++i) {
        int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
        ok = hi >= 0 && lo >= 0;
        t[i] = uint8_t(hi << 4 | lo);
    }
    // The value is a secret: never echoed in the error.
    if (!ok)
        throw_invalid(std::string("invalid ") + key + ": expected " +
                      std::to_string(2 * t.size()) + " lowercase hex digits");
    return t;
}

bool tokens_equal(std::span<const uint8_t> a, const Token &b) {
    if (a.size() != b.size()) return false;
    // No early exit: how long this takes must not tell where they differ.
    volatile uint8_t diff = 0;
    for (size_t i = 0; i < b.size(); ++i) diff = uint8_t(diff | (a[i] ^ b[i]));
    return diff == 0;
}

Greeting encode_greeting(const Token &parent_token) {
    Greeting g{};
    std::memcpy(g.data(), kGreetingMagic, 4);
    put16(g.data() + 4, kVersion);
    std::memcpy(g.data() + 8, parent_token.data(), parent_token.size());
    return g;
}

bool is_greeting(std::span<const uint8_t> msg) {
    return msg.size() == kGreetingSize &&
           std::memcmp(msg.data(), kGreetingMagic, 4) == 0;
}

Token decode_greeting(std::span<const uint8_t> msg) {
    if (!is_greeting(msg)) protocol_error("malformed greeting");
    uint16_t version = get16(msg.data() + 4);
    if (version != kVersion)
        protocol_error("the parent speaks version " + std::to_string(version) +
                       ", this child " + std::to_string(kVersion));
    if (get16(msg.data() + 6) != 0) protocol_error("reserved field is not zero");
    Token t{};
    std::memcpy(t.data(), msg.data() + 8, t.size());
    return t;
}

Hello encode_hello(const std::string &ifname, const Token &child_token) {
    Hello h{};
    if (ifname.empty() || ifname.size() > 15)
        throw_invalid("hand-over: interface name \"" + ifname +
                      "\" must be 1..15 bytes");
    std::memcpy(h.data(), kHelloMagic, 4);
    put16(h.data() + 4, kVersion);
    std::memcpy(h.data() + 8, ifname.data(), ifname.size());
    std::memcpy(h.data() + 24, child_token.data(), child_token.size());
    return h;
}

DecodedHello decode_hello(std::span<const uint8_t> msg) {
    if (msg.size() != kHelloSize)
        protocol_error("hello has " + std::to_string(msg.size()) + " bytes, want " +
                 std::to_string(kHelloSize));
    if (std::memcmp(msg.data(), kHelloMagic, 4) != 0) protocol_error("bad magic");
    uint16_t version = get16(msg.data() + 4);
    if (version != kVersion)
        protocol_error("unsupported version " + std::to_string(version));
    if (get16(msg.data() + 6) != 0) protocol_error("reserved field is not zero");
    const uint8_t *name = msg.data() + 8;
    size_t len = 0;
    while (len < 16 && name[len] != 0) ++len;
    if (len == 0 || len == 16) protocol_error("interface name not terminated");
    for (size_t i = len; i < 16; ++i)
        if (name[i] != 0) protocol_error("garbage after interface name");
    DecodedHello d;
    d.ifname.assign(reinterpret_cast<const char *>(name), len);
    std::memcpy(d.token.data(), msg.data() + 24, d.token.size());
    return d;
}

std::string encode_reply(rknp_status status, const std::string &message) {
    std::string m = message.substr(0, kReplyMessageMax);
    std::string r(10 + m.size(), '\0');
    auto *p = reinterpret_cast<uint8_t *>(r.data());
    std::memcpy(p, kReplyMagic, 4);
    put32(p + 4, uint32_t(status));
    put16(p + 8, uint16_t(m.size()));
    std::memcpy(p + 10, m.data(), m.size());
    return r;
}

Reply decode_reply(std::span<const uint8_t> msg) {
    if (msg.size() < 10 || msg.size() > kReplyMax) protocol_error("reply size");
    if (std::memcmp(msg.data(), kReplyMagic, 4) != 0)
        protocol_error("bad reply magic");
    Reply r;
    r.status = rknp_status(get32(msg.data() + 4));
    size_t len = get16(msg.data() + 8);
    if (len != msg.size() - 10) protocol_error("reply length mismatch");
    if (r.status < RKNP_OK || r.status > RKNP_ERR_INTERNAL)
        protocol_error("unknown reply status " + std::to_string(r.status));
    r.message.assign(reinterpret_cast<const char *>(msg.data() + 10), len);
    return r;
}

} // namespace rknp::handover
