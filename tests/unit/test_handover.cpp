// The hand-over: message codecs, peer checks, refusals the peer can read.
#include <doctest/doctest.h>

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>

#include "common/error.hpp"
#include "handover/client.hpp"
#include "handover/messages.hpp"
#include "handover/server.hpp"
#include "temp_dir.hpp"

using namespace rknp;
using namespace rknp::handover;

TEST_CASE("hello encodes the interface name and decodes back") {
    auto h = encode_hello("tap0");
    CHECK(decode_hello(h) == "tap0");
    CHECK(decode_hello(encode_hello("abcdefghijklmno")) == "abcdefghijklmno");
    CHECK_THROWS_AS(encode_hello(""), Error);
    CHECK_THROWS_AS(encode_hello("abcdefghijklmnop"), Error);
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
    auto h = encode_hello("tap0");
    expect(std::span(h).first(10), "hello has 10 bytes");
    auto bad = h;
    bad[0] = 'X';
    expect(bad, "bad magic");
    bad = h;
    bad[4] = 9;
    expect(bad, "unsupported version 9");
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

TEST_CASE("a socket path longer than sun_path is refused with a clear error") {
    std::string path = "/tmp/" + std::string(120, 'x') + "/rknp.sock";
    CHECK_THROWS_WITH_AS(listen_socket(path),
                         doctest::Contains("use a shorter state directory"),
                         Error);
}

namespace {

// Runs accept_tap on a thread and send_tap here; returns both outcomes.
struct Exchange {
    std::string server_error;
    rknp_status server_code = RKNP_OK;
    std::string client_error;
    rknp_status client_code = RKNP_OK;
};

// accept_delay_ms > 0 lets the client's hello be queued before the accept.
Exchange exchange(pid_t expected_pid, int fd, const std::string &ifname,
                  int accept_delay_ms = 0) {
    TempDir dir;
    std::string path = dir.path() + "/rknp.sock";
    UniqueFd listener = listen_socket(path);
    Exchange ex;
    auto server = std::async(std::launch::async, [&] {
        pollfd p{listener.get(), POLLIN, 0};
        ::poll(&p, 1, 5000);
        std::this_thread::sleep_for(std::chrono::milliseconds(accept_delay_ms));
        try {
            accept_tap(listener.get(), expected_pid, ::geteuid(), 2000,
                       [](Accepted &&) {});
        } catch (const Error &e) {
            ex.server_error = e.what();
            ex.server_code = e.code();
        }
    });
    try {
        send_tap(path, fd, ifname, 5000);
    } catch (const Error &e) {
        ex.client_error = e.what();
        ex.client_code = e.code();
    }
    server.get();
    return ex;
}

} // namespace

TEST_CASE("a peer that is not the child is refused, and told so") {
    UniqueFd fd(::eventfd(0, EFD_CLOEXEC));
    auto ex = exchange(::getpid() + 100000, fd.get(), "tap0");
    CHECK(ex.server_code == RKNP_ERR_PERMISSION);
    CHECK(ex.server_error.find("hand-over refused: peer pid") !=
          std::string::npos);
    CHECK(ex.client_code == RKNP_ERR_PERMISSION);
    CHECK(ex.client_error.find("parent refused the tap") != std::string::npos);
}

TEST_CASE("a refused peer whose hello was already queued still reads the refusal") {
    // Closing a unix socket with unread messages resets the peer; the parent
    // must drain before closing or the child sees ECONNRESET, not the reason.
    UniqueFd fd(::eventfd(0, EFD_CLOEXEC));
    for (int i = 0; i < 5; ++i) {
        auto ex = exchange(::getpid() + 100000, fd.get(), "tap0", 50);
        CHECK(ex.server_code == RKNP_ERR_PERMISSION);
        CHECK(ex.client_code == RKNP_ERR_PERMISSION);
        CHECK(ex.client_error.find("hand-over refused: peer pid") !=
              std::string::npos);
    }
}

TEST_CASE("the right peer handing over something that is not a tap is refused") {
    UniqueFd fd(::eventfd(0, EFD_CLOEXEC));
    auto ex = exchange(::getpid(), fd.get(), "tap0");
    CHECK(ex.server_code == RKNP_ERR_PROTOCOL);
    CHECK(ex.server_error == "hand-over: the fd is not a tun/tap device");
    CHECK(ex.client_code == RKNP_ERR_PROTOCOL);
}

TEST_CASE("send_tap to a socket nobody listens on fails with the path") {
    UniqueFd fd(::eventfd(0, EFD_CLOEXEC));
    TempDir dir;
    CHECK_THROWS_WITH_AS(send_tap(dir.path() + "/none.sock", fd.get(), "tap0", 100),
                         doctest::Contains("none.sock"), Error);
}
