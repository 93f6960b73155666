// SPDX-License-Identifier: Apache-2.0

// The hand-over's messages: hello, greeting and reply codecs, tokens, and
// the malformed messages a peer could send.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "handover/messages.hpp"

using namespace rknp;
using namespace rknp::handover;

TEST_CASE("hello encodes the interface name and token and decodes back") {
    Token t = random_token();
    auto h = encode_hello("tap0", t);
    CHECK(decode_hello(h).ifname == "tap0");
    CHECK(decode_hello(h).token == t);
    CHECK(decode_hello(encode_hello("abcdefghijklmno", t)).ifname == "abcdefghijklmno");
    CHECK_THROWS_AS(encode_hello("", t), Error);
    CHECK_THROWS_AS(encode_hello("abcdefghijklmnop", t), Error);
}

TEST_CASE("greetings carry the parent token; others are not greetings") {
    Token t = random_token();
    auto g = encode_greeting(t);
    CHECK(is_greeting(g));
    CHECK(decode_greeting(g) == t);
    auto r = encode_reply(RKNP_ERR_PERMISSION, "no");
    CHECK_FALSE(is_greeting({reinterpret_cast<const uint8_t *>(r.data()), r.size()}));
    auto bad = g;
    bad[4] = 1; // a version 1 parent
    CHECK_THROWS_WITH_AS(decode_greeting(bad),
                         "hand-over: the parent speaks version 1, this child 2",
                         Error);
    CHECK_THROWS_AS(decode_greeting(std::span(g).first(10)), Error);
}

TEST_CASE("tokens compare equal only when every byte is") {
    Token t = random_token();
    CHECK(tokens_equal(t, t));
    for (size_t i = 0; i < t.size(); ++i) {
        Token u = t;
        u[i] ^= 0x80;
        CHECK_FALSE(tokens_equal(u, t));
    }
    CHECK_FALSE(tokens_equal(std::span(t).first(15), t));
}

TEST_CASE("malformed hellos are protocol errors") {
    auto expect = [](std::span<const uint8_t> m, const char *part) {
        try {
            decode_hello(m);
            FAIL("accepted a malformed hello");
        } catch (const Error &e) {
            CHECK(e.code() == RKNP_ERR_PROTOCOL);
            CHECK(std::string(e.what()).find(part) != std::string::npos);
        }
    };
    auto h = encode_hello("tap0", random_token());
    expect(std::span(h).first(10), "hello has 10 bytes");
    auto bad = h;
    bad[0] = 'X';
    expect(bad, "bad magic");
    bad = h;
    bad[4] = 9;
    expect(bad, "unsupported version 9");
    bad = h;
    bad[4] = 1; // version 1 had no token
    expect(bad, "unsupported version 1");
    bad = h;
    bad[6] = 1;
    expect(bad, "reserved");
    bad = h;
    std::fill(bad.begin() + 8, bad.end(), 'a');
    expect(bad, "not terminated");
    bad = h;
    bad[8] = 0;
    expect(bad, "not terminated");
    bad = h;
    bad[20] = 'x';
    expect(bad, "garbage after");
}

TEST_CASE("replies carry status and message; malformed ones are rejected") {
    auto r = encode_reply(RKNP_ERR_PERMISSION, "go away");
    auto bytes = std::span(reinterpret_cast<const uint8_t *>(r.data()), r.size());
    auto d = decode_reply(bytes);
    CHECK(d.status == RKNP_ERR_PERMISSION);
    CHECK(d.message == "go away");
    CHECK(decode_reply(std::span(reinterpret_cast<const uint8_t *>(
                                     encode_reply(RKNP_OK, "").data()),
                                 10))
              .status == RKNP_OK);
    CHECK(encode_reply(RKNP_OK, std::string(1000, 'x')).size() == 10 + 256);
    CHECK_THROWS_AS(decode_reply(bytes.first(9)), Error);
    CHECK_THROWS_AS(decode_reply(bytes.first(12)), Error); // length mismatch
    std::string bad = r;
    bad[4] = 42;
    CHECK_THROWS_AS(decode_reply(std::span(
                        reinterpret_cast<const uint8_t *>(bad.data()), bad.size())),
                    Error);
}
