// SPDX-License-Identifier: Apache-2.0

// rknp's pesto protocol (plugin/cmd/common/pesto_protocol): requests made
// and read back, every prefix of a valid request waited for, hopeless
// bytes answered at once (and never saved by what follows), the replies,
// and what a client makes of a foreign or mismatched server.
#include <doctest/doctest.h>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "../unit/random_text.hpp"
#include "cmd/common/pesto_protocol.hpp"

using cmd::RequestState;
using cmd::pesto::Change;
using cmd::pesto::format_request;
using cmd::pesto::Op;
using cmd::pesto::parse_reply;
using cmd::pesto::parse_request;
using cmd::pesto::Proto;

namespace {

const std::vector<Change> kPodman = {{Op::add, Proto::tcp, "0.0.0.0/8080"},
                                     {Op::add, Proto::tcp, "[::]/8080"}};
const std::vector<Change> kMixed = {{Op::remove, Proto::udp, "10.0.0.1/53:5353"},
                                    {Op::add, Proto::tcp, "8080-8090:80-90,~8085"}};

TEST_CASE("pesto protocol: a request reads back as it was made") {
    CHECK(format_request(kPodman) ==
          "rknp-pesto 1\nadd tcp 0.0.0.0/8080\nadd tcp [::]/8080\nend\n");
    for (const auto &changes : {kPodman, kMixed}) {
        auto parsed = parse_request(format_request(changes));
        CHECK(parsed.state == RequestState::Complete);
        CHECK(parsed.changes == changes);
    }
    std::vector<Change> most(cmd::pesto::kMaxChanges,
                             {Op::add, Proto::udp, "[fd00::1234:5678]/65535"});
    auto parsed = parse_request(format_request(most));
    CHECK(parsed.state == RequestState::Complete);
    CHECK(parsed.changes.size() == cmd::pesto::kMaxChanges);
}

TEST_CASE("pesto protocol: what cannot be sent is refused before sending") {
    auto refused = [](const std::vector<Change> &c) {
        CHECK_THROWS_AS(format_request(c), std::invalid_argument);
    };
    refused({});
    refused({{Op::add, Proto::tcp, ""}});
    refused({{Op::add, Proto::tcp, "80 81"}});
    refused({{Op::add, Proto::tcp, "80\n"}});
    refused({{Op::add, Proto::tcp, "\xc3\xa9"}});
    refused({{Op::add, Proto::tcp, std::string(cmd::pesto::kMaxSpec + 1, '1')}});
    refused(std::vector<Change>(cmd::pesto::kMaxChanges + 1, {Op::add, Proto::tcp, "80"}));
    // Within both counts, over the size.
    refused(std::vector<Change>(cmd::pesto::kMaxChanges,
                                {Op::add, Proto::tcp, std::string(100, '1')}));
}

TEST_CASE("pesto protocol: no prefix of a valid request is an error") {
    for (const auto &changes : {kPodman, kMixed}) {
        std::string r = format_request(changes);
        for (size_t n = 0; n < r.size(); n++) {
            std::string p = r.substr(0, n);
            CAPTURE(p);
            auto parsed = parse_request(p);
            CHECK(parsed.state == RequestState::Incomplete);
            CHECK(parsed.changes.empty());
        }
    }
    // Versions with more digits may come; so may longer specs.
    CHECK(parse_request("rknp-pesto 12").state == RequestState::Incomplete);
    CHECK(parse_request("rknp-pesto 1\nadd tcp 1,2,3,4").state == RequestState::Incomplete);
    CHECK(parse_request("rknp-pesto 1\ne").state == RequestState::Incomplete);
    CHECK(parse_request("rknp-pesto 1\ndel").state == RequestState::Incomplete);
}

TEST_CASE("pesto protocol: what no byte can fix is answered at once") {
    struct Case {
        std::string bytes, error;
    };
    const std::string h = "rknp-pesto 1\n";
    for (const Case &c : std::vector<Case>{
             {"GET / HTTP/1.1\r\n", "not an rknp-pesto request"},
             {"{\"execute\": \"add_hostfwd\"}", "not an rknp-pesto request"},
             {"\n", "not an rknp-pesto request"},
             {"rknp-pesto\n", "no protocol version after 'rknp-pesto'"},
             {"rknp-pesto 2\n", "protocol version 2 is not supported: this "
                                "rknp-pasta speaks version 1"},
             {"rknp-pesto 0", "bad protocol version '0'"},
             {"rknp-pesto 01\n", "bad protocol version '01'"},
             {"rknp-pesto 123456", "bad protocol version '123456'"},
             {"rknp-pesto 1x", "bad protocol version '1x'"},
             {h + "foo", "line 2: unknown operation 'foo'"},
             {h + "add sctp", "line 2: unknown protocol 'sctp'"},
             {h + "add tcp 80 81", "line 2: too many fields"},
             {h + "add  tcp", "line 2: empty field"},
             {h + "add tcp\n", "line 2: missing fields"},
             {h + "add tcp \n", "line 2: empty port spec"},
             {h + "\n", "line 2: empty line"},
             {h + "end x", "line 2: 'end' stands alone on its line"},
             {h + "end\n", "no changes before 'end'"},
             {h + "add tcp 80\nend\nx", "bytes after 'end'"},
             {h + "add tcp 80\nend\n\n", "bytes after 'end'"},
             {h + "add tcp 8\x01", "line 2: byte 0x01 (only printable ASCII)"},
             {h + "add tcp 80\r\n", "line 2: byte 0x0d (only printable ASCII)"},
             {std::string("rknp\0", 5), "not an rknp-pesto request"},
             {h + std::string("add tcp 8\0", 10), "line 2: byte 0x00"},
             {h + "add tcp " + std::string(cmd::pesto::kMaxSpec + 1, '1'),
              "line 2: port spec longer than 256 bytes"},
         }) {
        CAPTURE(c.bytes);
        auto parsed = parse_request(c.bytes);
        CHECK(parsed.state == RequestState::Invalid);
        CHECK(parsed.error.find(c.error) != std::string::npos);
        CHECK(parsed.changes.empty());
    }
    std::string many = h;
    for (size_t i = 0; i <= cmd::pesto::kMaxChanges; i++) many += "add tcp 80\n";
    CHECK(parse_request(many).error == "more than 256 changes");
}

TEST_CASE("pesto protocol: a hopeless request stays hopeless whatever follows") {
    std::mt19937 rnd(35);
    const std::string alphabet = "rknp-esto 0123\nadtcpuldelen/:.[]~,\x01";
    int invalid = 0, incomplete = 0;
    for (int i = 0; i < 20000; i++) {
        // Half of them start well, to reach past the header.
        std::string s = (i % 2 ? "rknp-pesto 1\n" : "") + random_text(rnd, alphabet, 24);
        auto parsed = parse_request(s);
        CAPTURE(s);
        if (parsed.state == RequestState::Incomplete) {
            incomplete++;
            continue;
        }
        if (parsed.state != RequestState::Invalid) continue;
        invalid++;
        std::string tail = random_text(rnd, alphabet, 12);
        CAPTURE(tail);
        CHECK(parse_request(s + tail).state == RequestState::Invalid);
    }
    CHECK(invalid > 1000);
    CHECK(incomplete > 500);
}

TEST_CASE("pesto protocol: replies") {
    CHECK(cmd::pesto::ok_reply() == "rknp-pesto 1 ok\n");
    CHECK(cmd::pesto::error_reply("port 80 in use") == "rknp-pesto 1 error port 80 in use\n");
    // One printable line, whatever the message holds, and not too long.
    CHECK(cmd::pesto::error_reply("a\nb\x01") == "rknp-pesto 1 error a?b?\n");
    std::string longest = cmd::pesto::error_reply(std::string(5000, 'x'));
    CHECK(longest.size() < cmd::pesto::kMaxMessage + 40);
    CHECK(longest.find("...\n") != std::string::npos);

    auto ok = parse_reply("rknp-pesto 1 ok\n");
    CHECK(ok.ok);
    auto err = parse_reply(cmd::pesto::error_reply("tcp 0.0.0.0 port 80: in use"));
    CHECK(!err.ok);
    CHECK(err.message == "tcp 0.0.0.0 port 80: in use");
}

TEST_CASE("pesto protocol: a client names what else it got") {
    auto message = [](std::string_view bytes) {
        auto r = parse_reply(bytes);
        CHECK(!r.ok);
        return r.message;
    };
    CHECK(message("").starts_with("no reply: the socket closed the connection unanswered"));
    CHECK(message("\x01\x02garbage").starts_with("not an rknp-pasta control socket"));
    CHECK(message("rknp-pesto 2 ok\n") ==
          "protocol version mismatch: the socket speaks rknp-pesto protocol 2, "
          "this rknp-pesto speaks 1: use the rknp-pesto of the rknp release "
          "that runs the socket's rknp-pasta");
    CHECK(message("rknp-pesto 2 error protocol version 1 is not supported\n")
              .ends_with("(it said: protocol version 1 is not supported)"));
    CHECK(message("rknp-pesto 1 maybe\n").starts_with("malformed reply"));
    CHECK(message("rknp-pesto 1 ok").starts_with("malformed reply"));
    CHECK(message("rknp-pesto 1 ok\nmore").starts_with("malformed reply"));
    CHECK(message("rknp-pesto x ok\n").starts_with("malformed reply"));
    CHECK(message("rknp-pesto 1 error \x1b[31mred\n") == "?[31mred");
}

} // namespace
