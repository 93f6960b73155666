// SPDX-License-Identifier: Apache-2.0

// rknp-slirp4netns's API socket (plugin/cmd/rknp-slirp4netns: api_request,
// hostfwd_api, api_client, api_socket) without the stack: request framing
// (a prefix of valid JSON is never an error, a hopeless one always is),
// the forward cap and fd reserve, clients driven through the poll loop
// (served concurrently, each against its own deadline, replies of any
// size written whole), and the socket itself (mode 0600 under any umask,
// other files left alone, SO_PEERCRED, the client cap, accept(2) out of
// fds pausing instead of spinning).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "../unit/temp_dir.hpp"
#include "api_client.hpp"
#include "api_request.hpp"
#include "api_socket.hpp"
#include "cmd/common/errors.hpp"
#include "cmd/common/monotonic.hpp"
#include "cmd/common/unique_fd.hpp"
#include "hostfwd_api.hpp"

using s4n::ApiClient;
using s4n::ApiSocket;
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
class FakeBackend final : public s4n::ForwardBackend {
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
    auto random_text = [&](size_t max) {
        std::string s;
        size_t n = rnd() % max;
        for (size_t i = 0; i < n; i++) s += alphabet[rnd() % alphabet.size()];
        return s;
    };
    FakeBackend backend;
    int invalid = 0, complete = 0;
    for (int i = 0; i < 20000; i++) {
        std::string s = random_text(12);
        RequestState st = request_state(s);
        if (st == RequestState::Incomplete) continue;
        std::string tail = random_text(8);
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

// Lowers RLIMIT_NOFILE's soft limit for a scope.
class NofileLimit {
public:
    explicit NofileLimit(rlim_t soft) {
        REQUIRE(::getrlimit(RLIMIT_NOFILE, &old_) == 0);
        rlimit l = old_;
        l.rlim_cur = soft;
        REQUIRE(::setrlimit(RLIMIT_NOFILE, &l) == 0);
    }
    ~NofileLimit() { ::setrlimit(RLIMIT_NOFILE, &old_); }

private:
    rlimit old_{};
};

// The fd the next open gets.
int lowest_free_fd() {
    cmd::UniqueFd fd(::fcntl(0, F_DUPFD_CLOEXEC, 0));
    if (!fd) fd.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    REQUIRE(fd);
    return fd.get();
}

// The soft limit under which exactly `free` more fds can be opened (the
// open ones are what /proc/self/fd lists, less the listing's own).
rlim_t limit_leaving(int free) {
    std::vector<bool> open;
    std::error_code ec;
    for (const auto &e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
        size_t fd = std::stoul(e.path().filename().string());
        if (fd >= open.size()) open.resize(fd + 1);
        open[fd] = true;
    }
    REQUIRE(!ec);
    rlim_t limit = 0;
    for (int left = free; left > 0; limit++)
        if (limit >= open.size() || !open[limit] ||
            ::fcntl(int(limit), F_GETFD) < 0) // the listing's fd, closed now
            left--;
    return limit;
}

TEST_CASE("hostfwd api: refused when fewer than fd_reserve fds are left") {
    CHECK(s4n::spare_fds(64) == 64);
    FakeBackend backend;
    HostFwdApi api(backend, "10.0.2.100");
    int lowest = lowest_free_fd();
    {
        NofileLimit limit(limit_leaving(63));
        CHECK(s4n::spare_fds(64) == 63);
        CHECK(api.handle(add_req("tcp", "127.0.0.1", 8080)) ==
              R"({"error":{"desc":"bad request: add_hostfwd: too few file descriptors left"}})");
        CHECK(backend.adds == 0);
    }
    {
        NofileLimit limit(limit_leaving(64));
        CHECK(s4n::spare_fds(64) == 64);
        CHECK(api.handle(add_req("tcp", "127.0.0.1", 8080)) == R"({"return":{"id":1}})");
    }
    CHECK(lowest_free_fd() == lowest); // the probe closed what it opened
}

// ---- ApiClient ----

struct Pair {
    cmd::UniqueFd server, client;
    Pair() {
        int sv[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        server.reset(sv[0]);
        client.reset(sv[1]);
        REQUIRE(::fcntl(server.get(), F_SETFL, O_NONBLOCK) == 0);
        REQUIRE(::fcntl(client.get(), F_SETFL, O_NONBLOCK) == 0);
    }
};

void send_all(int fd, const std::string &s) {
    REQUIRE(::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == ssize_t(s.size()));
}

// What the peer can read now; eof set when the server closed.
std::string drain(int fd, bool *eof = nullptr) {
    std::string out;
    char buf[65536];
    for (;;) {
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n > 0) {
            out.append(buf, size_t(n));
            continue;
        }
        if (eof) *eof = n == 0;
        return out;
    }
}

const ApiClient::Answer kEcho = [](std::string_view r) {
    return "reply to " + std::string(r);
};

TEST_CASE("api client: a request in pieces is answered once whole") {
    Pair p;
    long t = 1000;
    ApiClient c(std::move(p.server), t);
    CHECK(c.events() == POLLIN);
    send_all(p.client.get(), "{\"execute\": \"list_");
    c.step(POLLIN, t, kEcho);
    CHECK(c.events() == POLLIN);
    CHECK(drain(p.client.get()).empty());
    send_all(p.client.get(), "hostfwd\"}");
    c.step(POLLIN, t + 10, kEcho);
    bool eof = false;
    CHECK(drain(p.client.get(), &eof) == "reply to " + kList);
    CHECK(eof);
    CHECK(c.done());
}

TEST_CASE("api client: a hopeless request is answered without waiting") {
    for (std::string s : {std::string("1e400"), std::string("{\"execute\": \"\xff\""),
                          std::string("x")}) {
        Pair p;
        long t = 1000;
        ApiClient c(std::move(p.server), t);
        send_all(p.client.get(), s); // no half-close
        c.step(POLLIN, t, kEcho);
        CAPTURE(s);
        CHECK(c.done());
        CHECK(drain(p.client.get()) == "reply to " + s);
    }
}

TEST_CASE("api client: the deadline answers what came") {
    Pair p;
    long t = 1000;
    ApiClient c(std::move(p.server), t);
    c.step(0, t + ApiClient::kDeadlineMs - 1, kEcho);
    CHECK(!c.done());
    CHECK(c.deadline() == t + ApiClient::kDeadlineMs);
    c.step(0, t + ApiClient::kDeadlineMs, kEcho);
    CHECK(c.done());
    CHECK(drain(p.client.get()) == "reply to ");
}

TEST_CASE("api client: too large") {
    Pair p;
    ApiClient c(std::move(p.server), 0);
    send_all(p.client.get(), std::string(5000, ' '));
    c.step(POLLIN, 0, kEcho);
    CHECK(c.done());
    CHECK(drain(p.client.get()) ==
          R"({"error":{"desc":"bad request: too large message"}})");
}

TEST_CASE("api client: a reply far beyond the socket buffer arrives whole") {
    Pair p;
    std::string big(3 << 20, 'x');
    ApiClient::Answer answer = [&](std::string_view) { return big; };
    ApiClient c(std::move(p.server), 0);
    send_all(p.client.get(), kList);
    std::string got;
    c.step(POLLIN, 0, answer);
    CHECK(c.events() == POLLOUT); // the first write could not take it all
    for (int i = 0; i < 10000 && !c.done(); i++) {
        got += drain(p.client.get());
        c.step(POLLOUT, 1, answer);
    }
    got += drain(p.client.get());
    CHECK(c.done());
    CHECK(got.size() == big.size());
}

TEST_CASE("api client: a client that takes no reply is closed at its deadline") {
    Pair p;
    std::string big(3 << 20, 'x');
    ApiClient::Answer answer = [&](std::string_view) { return big; };
    ApiClient c(std::move(p.server), 0);
    send_all(p.client.get(), kList);
    c.step(POLLIN, 500, answer);
    CHECK(c.deadline() == 500 + ApiClient::kDeadlineMs);
    c.step(POLLOUT, 500 + ApiClient::kDeadlineMs - 1, answer);
    CHECK(!c.done());
    c.step(0, 500 + ApiClient::kDeadlineMs, answer);
    CHECK(c.done());
}

// ---- ApiSocket ----

// Polls and dispatches until `until` says stop or ms pass.
template <class F> void pump(ApiSocket &s, long ms, F until) {
    long end = cmd::now_ms() + ms;
    std::vector<pollfd> fds;
    while (!until() && cmd::now_ms() < end) {
        fds.clear();
        long now = cmd::now_ms();
        size_t n = s.fill(fds, now);
        int timeout = s.timeout_ms(now);
        long left = end - now;
        if (timeout < 0 || timeout > left) timeout = int(left);
        ::poll(fds.data(), fds.size(), timeout);
        s.dispatch(std::span(fds).first(n), cmd::now_ms());
    }
}

cmd::UniqueFd connect_to(const std::string &path) {
    cmd::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    REQUIRE(fd);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    REQUIRE(::connect(fd.get(), reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
    REQUIRE(::fcntl(fd.get(), F_SETFL, O_NONBLOCK) == 0);
    return fd;
}

mode_t mode_of(const std::string &path) {
    struct stat st {};
    REQUIRE(::lstat(path.c_str(), &st) == 0);
    return st.st_mode;
}

TEST_CASE("api socket: mode 0600 whatever the umask") {
    TempDir dir;
    std::string path = dir.path() + "/api.sock";
    for (mode_t mask : {mode_t(0), mode_t(002), mode_t(022)}) {
        mode_t old = ::umask(mask);
        {
            ApiSocket s(path, kEcho);
            CHECK(::umask(mask) == mask); // restored after bind
            CAPTURE(mask);
            CHECK(S_ISSOCK(mode_of(path)));
            CHECK((mode_of(path) & 07777) == 0600);
        }
        ::umask(old);
        CHECK(!std::filesystem::exists(path)); // removed on destruction
    }
}

TEST_CASE("api socket: a stale socket is replaced, any other file refused") {
    TempDir dir;
    std::string path = dir.path() + "/api.sock";
    { // stale: a socket nobody listens on
        cmd::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM, 0));
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
        REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
    }
    { ApiSocket s(path, kEcho); }
    std::ofstream(path) << "precious\n";
    std::string what;
    try {
        ApiSocket s(path, kEcho);
    } catch (const cmd::Failure &f) {
        what = f.what();
        CHECK(f.exit_code() == 1);
    }
    CHECK(what == "api socket: " + path + " exists and is not a socket (left as it is)");
    std::ifstream in(path);
    std::string content;
    std::getline(in, content);
    CHECK(content == "precious");
    std::filesystem::remove(path);
    std::filesystem::create_symlink(dir.path() + "/elsewhere", path);
    CHECK_THROWS_AS(ApiSocket(path, kEcho), cmd::Failure);
    CHECK(std::filesystem::is_symlink(path));
}

TEST_CASE("api socket: what replaced the socket is not removed") {
    TempDir dir;
    std::string path = dir.path() + "/api.sock";
    {
        ApiSocket s(path, kEcho);
        std::filesystem::remove(path);
        std::ofstream(path) << "someone else's\n";
    }
    CHECK(std::filesystem::is_regular_file(path));
}

TEST_CASE("api socket: idle clients delay nobody") {
    TempDir dir;
    std::string path = dir.path() + "/api.sock";
    ApiSocket s(path, kEcho);
    std::vector<cmd::UniqueFd> idle;
    for (int i = 0; i < 3; i++) idle.push_back(connect_to(path));
    pump(s, 200, [&] { return s.clients() == 3; });
    REQUIRE(s.clients() == 3);
    cmd::UniqueFd c = connect_to(path);
    send_all(c.get(), kList);
    long start = cmd::now_ms();
    std::string reply;
    pump(s, 3000, [&] { return !(reply += drain(c.get())).empty(); });
    CHECK(reply == "reply to " + kList);
    CHECK(cmd::now_ms() - start < 200);
    CHECK(s.clients() == 3);
    // Each idle one at its own deadline, answered with what it sent.
    pump(s, 3000, [&] { return s.clients() == 0; });
    CHECK(s.clients() == 0);
    CHECK(drain(idle[0].get()) == "reply to ");
    CHECK(s.timeout_ms(cmd::now_ms()) == -1);
}

TEST_CASE("api socket: beyond kMaxClients new clients are closed at once") {
    TempDir dir;
    std::string path = dir.path() + "/api.sock";
    ApiSocket s(path, kEcho);
    std::vector<cmd::UniqueFd> idle;
    for (size_t i = 0; i < ApiSocket::kMaxClients; i++) {
        idle.push_back(connect_to(path));
        pump(s, 200, [&] { return s.clients() == i + 1; });
    }
    REQUIRE(s.clients() == ApiSocket::kMaxClients);
    cmd::UniqueFd extra = connect_to(path);
    send_all(extra.get(), kList);
    bool eof = false;
    std::string got;
    pump(s, 500, [&] {
        got += drain(extra.get(), &eof);
        return eof;
    });
    CHECK(eof);
    CHECK(got.empty());
    CHECK(s.clients() == ApiSocket::kMaxClients);
}

TEST_CASE("api socket: clients of another uid are closed unanswered") {
    if (::geteuid() != 0) {
        MESSAGE("skipped: needs root to connect as another uid");
        return;
    }
    TempDir dir;
    std::string path = dir.path() + "/api.sock";
    ApiSocket s(path, kEcho);
    // Past the mode (0600, root's): the uid check must hold on its own.
    REQUIRE(::chmod(path.c_str(), 0666) == 0);
    REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
    std::fflush(nullptr);
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        // 0: closed without a byte; 1: answered; 2: setup failed.
        if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
            ::setresuid(65534, 65534, 65534) != 0)
            ::_exit(2);
        int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
        if (::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) ::_exit(2);
        ::send(fd, kList.data(), kList.size(), MSG_NOSIGNAL);
        ::shutdown(fd, SHUT_WR);
        char b;
        ssize_t n = ::recv(fd, &b, 1, 0);
        ::_exit(n > 0 ? 1 : 0);
    }
    int status = 0;
    pump(s, 3000, [&] { return ::waitpid(pid, &status, WNOHANG) == pid; });
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(s.clients() == 0);
    // Root (the test) is served.
    cmd::UniqueFd c = connect_to(path);
    send_all(c.get(), kList);
    std::string reply;
    pump(s, 1000, [&] { return !(reply += drain(c.get())).empty(); });
    CHECK(reply == "reply to " + kList);
}

TEST_CASE("api socket: out of fds, accepting pauses instead of spinning") {
    TempDir dir;
    std::string path = dir.path() + "/api.sock";
    ApiSocket s(path, kEcho);
    cmd::UniqueFd c = connect_to(path); // queued, not accepted
    send_all(c.get(), kList);
    std::vector<pollfd> fds;
    long now = cmd::now_ms();
    {
        NofileLimit limit{rlim_t(lowest_free_fd())};
        REQUIRE(s.fill(fds, now) == 1);
        fds[0].revents = POLLIN;
        s.dispatch(fds, now);
        // Not polled for kAcceptPauseMs: poll(2) would return at once.
        fds.clear();
        CHECK(s.fill(fds, now) == 0);
        CHECK(s.timeout_ms(now) == int(ApiSocket::kAcceptPauseMs));
        fds.clear();
        CHECK(s.fill(fds, now + ApiSocket::kAcceptPauseMs - 1) == 0);
    }
    fds.clear();
    CHECK(s.fill(fds, now + ApiSocket::kAcceptPauseMs) == 1);
    std::string reply;
    pump(s, 3000, [&] { return !(reply += drain(c.get())).empty(); });
    CHECK(reply == "reply to " + kList);
}

} // namespace
