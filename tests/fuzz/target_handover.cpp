// SPDX-License-Identifier: Apache-2.0

// Fuzz target: the hand-over messages as the parent (decode_hello) and the
// child (decode_greeting, decode_reply) receive them from the socket. Decoding either
// succeeds with a message that re-encodes to the same bytes, or throws
// rknp::Error(RKNP_ERR_PROTOCOL).
#include <cstring>
#include <string>

#include "common/error.hpp"
#include "fuzz_input.hpp"
#include "handover/messages.hpp"

using namespace rknp;
using namespace rknp::handover;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    // The parent reads at most kHelloSize + 1 bytes; the child kReplyMax.
    std::span<const uint8_t> msg(data, size);
    try {
        DecodedHello d = decode_hello(msg.first(std::min(size, kHelloSize + 1)));
        Hello h = encode_hello(d.ifname, d.token);
        fuzz::require(size >= kHelloSize &&
                          std::memcmp(h.data(), data, kHelloSize) == 0,
                      "hello does not re-encode to the same bytes");
    } catch (const Error &e) {
        // INVALID_ARGUMENT would come from encode_hello: decode accepted a
        // name that encode refuses.
        fuzz::require(e.code() == RKNP_ERR_PROTOCOL, "hello: unexpected error code");
    }
    try {
        Token t = decode_greeting(msg.first(std::min(size, kReplyMax)));
        Greeting g = encode_greeting(t);
        fuzz::require(size == kGreetingSize &&
                          std::memcmp(g.data(), data, kGreetingSize) == 0,
                      "greeting does not re-encode to the same bytes");
    } catch (const Error &e) {
        fuzz::require(e.code() == RKNP_ERR_PROTOCOL, "greeting: unexpected error code");
    }
    try {
        Reply r = decode_reply(msg.first(std::min(size, kReplyMax)));
        std::string again = encode_reply(r.status, r.message);
        fuzz::require(again.size() <= size &&
                          std::memcmp(again.data(), data, again.size()) == 0,
                      "reply does not re-encode to the same bytes");
    } catch (const Error &e) {
        fuzz::require(e.code() == RKNP_ERR_PROTOCOL, "reply: unexpected error code");
    }
    return 0;
}
