// SPDX-License-Identifier: Apache-2.0

// rknp-slirp4netns's API (plugin/cmd/rknp-slirp4netns: api_request,
// hostfwd_api) without the stack or the socket (test_control_socket.cpp):
// request framing (a prefix of valid JSON is never an error, a hopeless
// one always is), slirp4netns's replies, the forward cap and fd reserve,
// and what the control socket asks of the protocol.
#include <doctest/doctest.h>

#include <random>
#include <string>

#include "../unit/fd_limits.hpp"
#include "../unit/random_text.hpp"
#include "api_request.hpp"
#include "cmd/common/forward_backend.hpp"
#include "hostfwd_api.hpp"

using s4n::HostFwdApi;
using s4n::RequestState;
using s4n::request_state;

namespace {

const std::string kParseError =
    R"({"error":{"desc":"bad request: cannot parse JSON"}})";
const std::string kList = R"({"execute": "list_hostfwd"})";

std::string add_req(const std::string &proto, const std::string &host, int port,
                    int guest_port = 80) {
    return R"({"execute": "add_hostfwd", "arguments": {"proto": ")" + proto +
           R"(", "host_addr": ")" + host + R"(", "host_port": )" +
           std::to_string(port) + R"(, "guest_port": )" +
           std::to_string(guest_port) + "}}";
}

// Accepts every forward, numbering them.
class FakeBackend final : public cmd::ForwardBackend {
public:
    int adds = 0;
    bool add(const rknp_forward &, uint32_t &id, std::string &) override {
        id = uint32_t(++adds);
        return true;
    }
    bool remove(uint32_t, std::string &) override { return true; }
};

size_t count(const std::string &s, const std::string &what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos;
         at = s.find(what, at + 1))
        n++;
    return n;
}

// ---- request framing ----

TEST_CASE("api request: whole first values are answered") {
    for (std::string s : {kList, kList + "\n", kList + " trailing",
                          std::string("[1, 2]"), std::string("\"x\""),
                          std::string("true"), std::string("12 "),
                          std::string("{}"), std::string("{\"a\":1e-400}")}) {
        CAPTURE(s);
        CHECK(request_state(s) == RequestState::Complete);
    }
    // A NUL ends the text as parson's C string: nothing later counts.
    CHECK(request_state(std::string("{}\0{", 4)) == RequestState::Complete);
}

TEST_CASE("api request: what more bytes may still complete is waited for") {
    for (std::string s :
         {std::string(""), std::string("  "), std::string("{\"execute\": \"list_"),
          std::string("{\"a\":1"), std::string("tru"), std::string("\"\xc3"),
          std::string("\"\xe2\x82"), std::string("\"\\ud800"),
          std::string("1"), std::string("12"), std::string("-"),
          std::string("1e"), std::string("1e-"), std::string("{\"a\":1e4"),
          std::string("\xEF\xBB"),
          // Overflows now, but "e-400" would bring it back.
          "{\"a\":1" + std::string(400, '0'), "1" + std::string(400, '0'),
          "{\"a\":1" + std::string(400, '0') + "e-1"}) {
        CAPTURE(s);
        CHECK(request_state(s) == RequestState::Incomplete);
    }
}

TEST_CASE("api request: what no byte can fix is answered at once") {
    for (std::string s :
         {std::string("1e400"), std::string("{\"a\":1e400"),
          std::string("{\"a\":1e+400}"), std::string("-1E400"),
          std::string("{\"execute\": \"\xff"), std::string("\"\xe2\x28"),
          std::string("x"), std::string("]"), std::string("{\"a\" 1"),
          std::string("[1,]"), std::string("{\"a\":1e400,"),
          std::string("{\"a\":01}"), std::string("/* c */ {}"),
          std::string("\xff\xfe\0garbage", 10), std::string("{\0", 2)}) {
        CAPTURE(s);
        CHECK(request_state(s) == RequestState::Invalid);
    }
}

TEST_CASE("api request: no prefix of a valid request is an error") {
    std::vector<std::string> valid = {
        kList,
        add_req("tcp", "127.0.0.1", 8080),
        R"({"execute": "remove_hostfwd", "arguments": {"id": 12}})",
        R"({"execute":"add_hostfwd","arguments":{"proto":"udp","host_port":5.5e1,"guest_port":-0.25E+2,"x":[true,false,null,"\u00e9\ud83d\ude00 \"q\"",{}]}})",
        "{\"k\": \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}",
        "\xEF\xBB\xBF{\"bom\": 1}",
        "[1, 2]", "\"s\"", "null",
    };
    for (const std::string &v : valid) {
        for (size_t n = 0; n < v.size(); n++) {
            std::string p = v.substr(0, n);
            CAPTURE(p);
            CHECK(request_state(p) != RequestState::Invalid);
        }
        CHECK(request_state(v) == RequestState::Complete);
    }
}

TEST_CASE("api request: the answer never changes with what follows") {
    // Random texts made of JSON's bytes: Invalid ones parse as "cannot parse
    // JSON" however they continue; Complete ones answer the same whatever
    // follows. (handle() on a fresh table: no request here adds anything.)
    std::mt19937 rnd(37);
    const std::string alphabet = "{}[]:,\" 0123456789.eE+-tfnrulasx\\\xc3\xa9\xff";
    FakeBackend backend;
    int invalid = 0, complete = 0;
    for (int i = 0; i < 20000; i++) {
        std::string s = random_text(rnd, alphabet, 12);
        RequestState st = request_state(s);
        if (st == RequestState::Incomplete) continue;
        std::string tail = random_text(rnd, alphabet, 8);
        HostFwdApi a(backend, "10.0.2.100"), b(backend, "10.0.2.100");
        CAPTURE(s);
        CAPTURE(tail);
        if (st == RequestState::Invalid) {
            invalid++;
            CHECK(a.handle(s) == kParseError);
            CHECK(b.handle(s + tail) == kParseError);
        } else {
            complete++;
            CHECK(a.handle(s) == b.handle(s + tail));
        }
    }
    CHECK(invalid > 1000);
    CHECK(complete > 100);
    CHECK(backend.adds == 0);
}

// ---- HostFwdApi ----

TEST_CASE("hostfwd api: slirp4netns' replies") {
    FakeBackend backend;
    HostFwdApi api(backend, "10.0.2.100");
    CHECK(api.handle(kList) == R"({"entries":[]})");
    CHECK(api.handle(add_req("tcp", "127.0.0.1", 8080)) == R"({"return":{"id":1}})");
    CHECK(api.handle(kList) ==
          R"({"entries":[{"id":1,"proto":"tcp","host_addr":"127.0.0.1","host_port":8080,"guest_addr":"10.0.2.100","guest_port":80}]})");
    CHECK(api.handle(R"({"execute": "remove_hostfwd", "arguments": {"id": 1}})") ==
          R"({"return":{}})");
    CHECK(api.handle("[1]") == R"j({"error":{"desc":"bad request: json_object() failed"}})j");
    CHECK(api.handle("{") == kParseError);
}

TEST_CASE("hostfwd api: at most max_forwards forwards") {
    FakeBackend backend;
    HostFwdApi api(backend, "10.0.2.100", {.max_forwards = 3, .fd_reserve = 64});
    for (int i = 1; i <= 3; i++)
        CHECK(api.handle(add_req("udp", "127.0.0.1", 1000 + i)) ==
              R"({"return":{"id":)" + std::to_string(i) + "}}");
    CHECK(api.handle(add_req("udp", "127.0.0.1", 1004)) ==
          R"j({"error":{"desc":"bad request: add_hostfwd: too many forwards (max 3)"}})j");
    CHECK(backend.adds == 3);
    // Bad arguments still get slirp4netns' reply, not the cap's.
    CHECK(api.handle(add_req("sctp", "127.0.0.1", 1004)) ==
          R"({"error":{"desc":"bad request: add_hostfwd: bad arguments.proto"}})");
    CHECK(api.handle(R"({"execute": "remove_hostfwd", "arguments": {"id": 2}})") ==
          R"({"return":{}})");
    CHECK(api.handle(add_req("udp", "127.0.0.1", 1004)) == R"({"return":{"id":4}})");
    CHECK(api.forwards() == 3);
}

TEST_CASE("hostfwd api: the default cap lists thousands of forwards") {
    FakeBackend backend;
    HostFwdApi api(backend, "10.0.2.100");
    for (int i = 0; i < 4096; i++)
        REQUIRE(api.handle(add_req(i % 2 ? "udp" : "tcp",
                                   "127.1." + std::to_string(i / 256) + "." +
                                       std::to_string(i % 256),
                                   40000)) ==
                R"({"return":{"id":)" + std::to_string(i + 1) + "}}");
    CHECK(api.handle(add_req("tcp", "127.0.0.1", 40001)) ==
          R"j({"error":{"desc":"bad request: add_hostfwd: too many forwards (max 4096)"}})j");
    std::string list = api.handle(kList);
    CHECK(count(list, R"("id":)") == 4096);
    CHECK(list.size() > 400000);
}

TEST_CASE("hostfwd api: refused when fewer than fd_reserve fds are left") {
    CHECK(cmd::spare_fds(64) == 64);
    FakeBackend backend;
    HostFwdApi api(backend, "10.0.2.100");
    int lowest = lowest_free_fd();
    {
        NofileLimit limit(limit_leaving(63));
        CHECK(cmd::spare_fds(64) == 63);
        CHECK(api.handle(add_req("tcp", "127.0.0.1", 8080)) ==
              R"({"error":{"desc":"bad request: add_hostfwd: too few file descriptors left"}})");
        CHECK(backend.adds == 0);
    }
    {
        NofileLimit limit(limit_leaving(64));
        CHECK(cmd::spare_fds(64) == 64);
        CHECK(api.handle(add_req("tcp", "127.0.0.1", 8080)) == R"({"return":{"id":1}})");
    }
    CHECK(lowest_free_fd() == lowest); // the probe closed what it opened
}

TEST_CASE("hostfwd api: the control socket's side") {
    FakeBackend backend;
    HostFwdApi api(backend, "10.0.2.100");
    CHECK(std::string(api.tag()) == "api_handler");
    CHECK(api.max_request() == 4096); // slirp4netns's read buffer
    CHECK(api.state("{\"execute\": ") == RequestState::Incomplete);
    CHECK(api.state(kList) == RequestState::Complete);
    CHECK(api.state("x") == RequestState::Invalid);
    CHECK(api.answer(kList) == R"({"entries":[]})");
    CHECK(api.answer(std::string("{}\0junk", 7)) ==
          R"({"error":{"desc":"bad request: no execute found"}})");
    CHECK(api.too_large("{") == R"({"error":{"desc":"bad request: too large message"}})");
}

} // namespace
