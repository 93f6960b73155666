// SPDX-License-Identifier: Apache-2.0

// rknp-pasta's side of the pesto protocol (plugin/cmd/rknp-pasta/
// pesto_server) on a fake backend: Podman's and rootlesskit's forms, the
// namespace's address as the target, deletes that must match, all or
// none (a failing bind undoes the request), the forward cap and fd
// reserve, specs refused by name; then rknp-pesto's exchange
// (plugin/cmd/rknp-pesto/exchange) with a real control socket.
#include <doctest/doctest.h>

#include <atomic>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../unit/fd_limits.hpp"
#include "../unit/socket_rig.hpp"
#include "../unit/temp_dir.hpp"
#include "cmd/common/control_socket.hpp"
#include "cmd/common/errors.hpp"
#include "cmd/common/pesto_protocol.hpp"
#include "cmd/rknp-pasta/pesto_server.hpp"
#include "cmd/rknp-pesto/exchange.hpp"

using cmd::pesto::Change;
using cmd::pesto::Op;
using cmd::pesto::Proto;
using pasta::PestoServer;

namespace {

const char *kGuest = "10.0.2.100";

// The forwards in force, as the library would hold them; binds of
// `in_use` ports fail, and so do IPv6 ones when !ipv6.
class FakeBackend final : public cmd::ForwardBackend {
public:
    struct Held {
        uint32_t proto;
        std::string host_addr, guest_addr;
        uint32_t host_port, guest_port;
    };
    std::map<uint32_t, Held> held;
    std::set<uint32_t> in_use;
    bool ipv6 = true;
    uint32_t next = 1;

    bool add(const rknp_forward &f, uint32_t &id, std::string &error) override {
        std::string addr = f.host_addr ? f.host_addr : "0.0.0.0";
        if (in_use.count(f.host_port)) {
            error = "bind: Address already in use";
            return false;
        }
        if (!ipv6 && addr.find(':') != std::string::npos) {
            error = "socket: Address family not supported by protocol";
            return false;
        }
        id = next++;
        held[id] = {f.protocol, addr, f.guest_addr ? f.guest_addr : "(null)",
                    f.host_port, f.guest_port};
        return true;
    }
    bool remove(uint32_t id, std::string &error) override {
        if (!held.erase(id)) {
            error = "no such forward";
            return false;
        }
        return true;
    }
    // "tcp 0.0.0.0:8080->10.0.2.100:80" of each, sorted.
    std::set<std::string> list() const {
        std::set<std::string> out;
        for (const auto &[id, h] : held)
            out.insert(std::string(h.proto == RKNP_PROTO_TCP ? "tcp " : "udp ") +
                       h.host_addr + ":" + std::to_string(h.host_port) + "->" +
                       h.guest_addr + ":" + std::to_string(h.guest_port));
        return out;
    }
};

struct Rig {
    pasta::ForwardTable table;
    FakeBackend backend;
    PestoServer server;
    explicit Rig(bool ipv6 = true, cmd::ForwardLimits limits = {})
        : server(table, backend, kGuest, ipv6, cmd::PortRange{}, limits) {}
    // A forward the command line or "auto" made (PortForwarder's way).
    void made_elsewhere(uint32_t proto, const char *addr, uint16_t hp, uint16_t gp) {
        rknp_forward f = RKNP_FORWARD_INIT;
        f.protocol = proto;
        f.host_addr = addr;
        f.host_port = hp;
        f.guest_port = gp;
        uint32_t id = 0;
        std::string error;
        REQUIRE(backend.add(f, id, error));
        table.add({proto, addr, hp, gp, id, ""});
    }
    std::string apply(std::vector<Change> changes) { return server.apply(changes); }
};

Change add_tcp(const std::string &s) { return {Op::add, Proto::tcp, s}; }
Change del_tcp(const std::string &s) { return {Op::remove, Proto::tcp, s}; }

TEST_CASE("pesto server: Podman's form, to the namespace's address") {
    Rig r;
    CHECK(r.apply({add_tcp("0.0.0.0/8080"), add_tcp("[::]/8080")}) == "");
    CHECK(r.backend.list() == std::set<std::string>{"tcp 0.0.0.0:8080->10.0.2.100:8080",
                                                    "tcp :::8080->10.0.2.100:8080"});
    CHECK(r.apply({del_tcp("0.0.0.0/8080"), del_tcp("[::]/8080")}) == "");
    CHECK(r.backend.held.empty());
    CHECK(r.server.forwards() == 0);
}

TEST_CASE("pesto server: Podman 6's bridge networks, to a container's address") {
    // The container's address on a bridge network inside the namespace:
    // the forward goes there, not to the namespace's own address.
    Rig r;
    CHECK(r.apply({add_tcp("0.0.0.0/18092:10.89.0.2/8000"),
                   {Op::add, Proto::udp, "0.0.0.0/18093:10.89.0.2/8001"}}) == "");
    CHECK(r.backend.list() == std::set<std::string>{"tcp 0.0.0.0:18092->10.89.0.2:8000",
                                                    "udp 0.0.0.0:18093->10.89.0.2:8001"});
    CHECK(r.apply({add_tcp("0.0.0.0/18092:10.89.0.3/8000")}) ==
          "tcp 0.0.0.0 port 18092 is forwarded already (to 10.89.0.2 port 8000)");
    // A delete names the same target, or none of another's.
    CHECK(r.apply({del_tcp("0.0.0.0/18092:10.89.0.3/8000")}) ==
          "tcp 0.0.0.0 port 18092 forwards to 10.89.0.2 port 8000, not 10.89.0.3 port 8000");
    CHECK(r.apply({del_tcp("0.0.0.0/18092:8000")}) ==
          "tcp 0.0.0.0 port 18092 forwards to 10.89.0.2 port 8000, not port 8000");
    CHECK(r.apply({del_tcp("0.0.0.0/18092:10.89.0.2/8000")}) == "");
    CHECK(r.backend.list() == std::set<std::string>{"udp 0.0.0.0:18093->10.89.0.2:8001"});
    // Without an address a spec still binds 0.0.0.0 and ::, both to it.
    CHECK(r.apply({add_tcp("18094:[10.89.0.2]/80")}) == "");
    CHECK(r.backend.list().count("tcp :::18094->10.89.0.2:80") == 1);
    // IPv6 targets (Podman 6's dual-stack bridge networks), canonical.
    CHECK(r.apply({add_tcp("[::]/18095:[fd00:0::2]/80"),
                   {Op::add, Proto::udp, "[::]/18095:[fd00::2]/80"}}) == "");
    CHECK(r.backend.list().count("tcp :::18095->fd00::2:80") == 1);
    CHECK(r.backend.list().count("udp :::18095->fd00::2:80") == 1);
    CHECK(r.apply({add_tcp("[::]/18095:[fd00::3]/80")}) ==
          "tcp [::] port 18095 is forwarded already (to fd00::2 port 80)");
    CHECK(r.apply({del_tcp("[::]/18095:[fd00::2]/80")}) == "");
    CHECK(r.backend.list().count("tcp :::18095->fd00::2:80") == 0);
}

TEST_CASE("pesto server: rootlesskit's form, one address and a guest port") {
    Rig r;
    CHECK(r.apply({{Op::add, Proto::udp, "127.0.0.1/15353:53"}}) == "");
    CHECK(r.apply({add_tcp("0.0.0.0/18080:80")}) == "");
    CHECK(r.backend.list() == std::set<std::string>{"tcp 0.0.0.0:18080->10.0.2.100:80",
                                                    "udp 127.0.0.1:15353->10.0.2.100:53"});
    CHECK(r.apply({del_tcp("0.0.0.0/18080:80")}) == "");
    CHECK(r.apply({del_tcp("0.0.0.0/18080:80")}) == "tcp 0.0.0.0 port 18080 is not forwarded");
    // Other protocol, other table entry.
    CHECK(r.apply({{Op::remove, Proto::tcp, "127.0.0.1/15353:53"}}).find("is not forwarded") !=
          std::string::npos);
    CHECK(r.backend.list() == std::set<std::string>{"udp 127.0.0.1:15353->10.0.2.100:53"});
}

TEST_CASE("pesto server: the command line's and auto's forwards are its to delete") {
    Rig r;
    r.made_elsewhere(RKNP_PROTO_TCP, "0.0.0.0", 8080, 80); // -t 8080:80
    r.made_elsewhere(RKNP_PROTO_TCP, "::", 8080, 80);
    r.made_elsewhere(RKNP_PROTO_UDP, "0.0.0.0", 5353, 5353); // -u auto
    // Found when added again, deleted as named, all or none.
    CHECK(r.apply({add_tcp("0.0.0.0/8080:80")}) ==
          "tcp 0.0.0.0 port 8080 is forwarded already (to port 80)");
    CHECK(r.apply({del_tcp("8080:81")}) == "tcp 0.0.0.0 port 8080 forwards to port 80, not port 81");
    CHECK(r.backend.held.size() == 3);
    CHECK(r.apply({del_tcp("8080:80"), {Op::remove, Proto::udp, "0.0.0.0/5353"}}) == "");
    CHECK(r.backend.held.empty());
    CHECK(r.server.forwards() == 0);
    // A failed request restores the one it had deleted.
    r.made_elsewhere(RKNP_PROTO_TCP, "127.0.0.1", 9090, 90);
    CHECK(r.apply({del_tcp("127.0.0.1/9090:90"), del_tcp("127.0.0.1/9091")}) ==
          "tcp 127.0.0.1 port 9091 is not forwarded");
    CHECK(r.backend.list() == std::set<std::string>{"tcp 127.0.0.1:9090->10.0.2.100:90"});
    CHECK(r.server.forwards() == 1);
}

TEST_CASE("pesto server: a delete must name the forward as it is") {
    Rig r;
    CHECK(r.apply({add_tcp("0.0.0.0/8080:80")}) == "");
    CHECK(r.apply({del_tcp("0.0.0.0/8080:81")}) ==
          "tcp 0.0.0.0 port 8080 forwards to port 80, not port 81");
    CHECK(r.apply({del_tcp("127.0.0.1/8080:80")}).find("is not forwarded") != std::string::npos);
    CHECK(r.backend.held.size() == 1);
    // Addresses are compared as addresses, not as text.
    CHECK(r.apply({add_tcp("[0:0::0]/9090")}) == "");
    CHECK(r.apply({del_tcp("[::]/9090")}) == "");
}

TEST_CASE("pesto server: a forward in force is not added twice") {
    Rig r;
    CHECK(r.apply({add_tcp("0.0.0.0/8080:80")}) == "");
    CHECK(r.apply({add_tcp("0.0.0.0/8080:81")}) ==
          "tcp 0.0.0.0 port 8080 is forwarded already (to port 80)");
    CHECK(r.apply({add_tcp("[::1]/8080"), add_tcp("[::1]/8080")}) ==
          "tcp [::1] port 8080 is forwarded already (to port 8080)");
    CHECK(r.backend.held.size() == 1); // the first [::1] undone too
}

TEST_CASE("pesto server: all or none") {
    Rig r;
    r.backend.in_use = {8082};
    CHECK(r.apply({add_tcp("0.0.0.0/8080-8082")}) ==
          "cannot forward tcp 0.0.0.0 port 8082 to port 8082: bind: Address already in use");
    CHECK(r.backend.held.empty());
    CHECK(r.server.forwards() == 0);
    // A delete undone by a failing add comes back (under a new id).
    CHECK(r.apply({add_tcp("0.0.0.0/9000")}) == "");
    CHECK(r.apply({del_tcp("0.0.0.0/9000"), add_tcp("0.0.0.0/8082")}).starts_with(
        "cannot forward tcp 0.0.0.0 port 8082"));
    CHECK(r.backend.list() == std::set<std::string>{"tcp 0.0.0.0:9000->10.0.2.100:9000"});
    CHECK(r.server.forwards() == 1);
    CHECK(r.apply({del_tcp("0.0.0.0/9000")}) == "");
    CHECK(r.backend.held.empty());
}

TEST_CASE("pesto server: a spec without an address is 0.0.0.0 and ::, as -t") {
    Rig r;
    CHECK(r.apply({add_tcp("8080,8081:81")}) == "");
    CHECK(r.backend.list() == std::set<std::string>{
                                  "tcp 0.0.0.0:8080->10.0.2.100:8080",
                                  "tcp 0.0.0.0:8081->10.0.2.100:81",
                                  "tcp :::8080->10.0.2.100:8080",
                                  "tcp :::8081->10.0.2.100:81"});
    CHECK(r.apply({del_tcp("8080,8081:81")}) == "");
    CHECK(r.backend.held.empty());
    // A host without IPv6: "::" cannot be bound, and that is fine.
    r.backend.ipv6 = false;
    CHECK(r.apply({add_tcp("7070")}) == "");
    CHECK(r.backend.list() == std::set<std::string>{"tcp 0.0.0.0:7070->10.0.2.100:7070"});
    CHECK(r.apply({del_tcp("7070")}) == "");
    // An explicit one must be bound.
    CHECK(r.apply({add_tcp("[::]/7070")}).starts_with("cannot forward tcp [::] port 7070"));
    // -4: no "::" at all.
    Rig v4(false);
    CHECK(v4.apply({add_tcp("7070")}) == "");
    CHECK(v4.backend.list() == std::set<std::string>{"tcp 0.0.0.0:7070->10.0.2.100:7070"});
}

TEST_CASE("pesto server: specs it cannot honour are refused by name") {
    Rig r;
    CHECK(r.apply({add_tcp("0")}) ==
          "-t: invalid port specifier '0': port 0 is not in 1-65535");
    CHECK(r.apply({{Op::add, Proto::udp, "1.2.3/80"}}).starts_with("-u: invalid port specifier"));
    CHECK(r.apply({add_tcp("auto")}) ==
          "-t auto: 'none' and 'auto' are rknp-pasta's start-up modes, not "
          "forwards to add or delete (name the ports)");
    CHECK(r.apply({add_tcp("none")}).starts_with("-t none: 'none' and 'auto'"));
    CHECK(r.apply({add_tcp("%eth0/80")}) ==
          "-t %eth0/80: binding to an interface (%IFACE) is not supported by rknp-pasta");
    // A good change before a bad one is not applied either.
    CHECK(r.apply({add_tcp("8080"), add_tcp("0")}).starts_with("-t: invalid"));
    CHECK(r.backend.held.empty());
}

TEST_CASE("pesto server: at most max_forwards, checked before anything binds") {
    Rig r(false, {.max_forwards = 3, .fd_reserve = 64});
    CHECK(r.apply({add_tcp("8080-8083")}) ==
          "too many forwards: 0 in force and 4 more asked for, at most 3");
    CHECK(r.backend.held.empty());
    CHECK(r.apply({add_tcp("8080-8082")}) == "");
    CHECK(r.apply({add_tcp("9000")}) ==
          "too many forwards: 3 in force and 1 more asked for, at most 3");
    // A delete and an add in one request: the cap counts what is asked.
    CHECK(r.apply({del_tcp("8080"), add_tcp("9000")}).starts_with("too many forwards"));
    // Ranges are not expanded past the cap.
    Rig big;
    CHECK(big.apply({add_tcp("1-65535")}) ==
          "the request names more than 8192 forwards (at most 4096 are in force)");
    CHECK(big.backend.held.empty());
}

TEST_CASE("pesto server: refused when fewer than the reserve of fds are left") {
    Rig r(false);
    {
        NofileLimit limit(limit_leaving(64 + 1));
        CHECK(r.apply({add_tcp("8080-8081")}) ==
              "too few file descriptors left: 65 under RLIMIT_NOFILE, 2 forwards "
              "need one each and 64 stay in reserve");
        CHECK(r.apply({add_tcp("8080")}) == "");
    }
    CHECK(r.backend.held.size() == 1);
}

TEST_CASE("pesto server: the socket's side") {
    Rig r;
    CHECK(std::string(r.server.tag()) == "rknp-pasta: -c socket");
    CHECK(r.server.max_request() == cmd::pesto::kMaxRequest);
    std::string req = cmd::pesto::format_request({add_tcp("0.0.0.0/8080")});
    CHECK(r.server.state(req.substr(0, 20)) == cmd::RequestState::Incomplete);
    CHECK(r.server.state(req) == cmd::RequestState::Complete);
    CHECK(r.server.answer(req) == "rknp-pesto 1 ok\n");
    CHECK(r.server.answer(req) ==
          "rknp-pesto 1 error tcp 0.0.0.0 port 8080 is forwarded already (to port 8080)\n");
    CHECK(r.server.answer(req.substr(0, 20)) ==
          "rknp-pesto 1 error bad request: incomplete (it ends before 'end')\n");
    CHECK(r.server.answer("rknp-pesto 2\nadd tcp 80\nend\n") ==
          "rknp-pesto 1 error bad request: protocol version 2 is not supported: "
          "this rknp-pasta speaks version 1 (run the rknp-pesto of the same rknp "
          "release)\n");
    // A prefix of a valid request (specs are checked once it is whole).
    std::string full = "rknp-pesto 1\n";
    while (full.size() < 20000) full += "add tcp " + std::string(200, '1') + "\n";
    REQUIRE(r.server.state(full.substr(0, 16384)) == cmd::RequestState::Incomplete);
    full.resize(16384);
    CHECK(r.server.too_large(full) == "rknp-pesto 1 error bad request: 16384 bytes or more\n");
    CHECK(r.server.too_large("GET /" + full).starts_with(
        "rknp-pesto 1 error bad request: not an rknp-pesto request"));
}

// ---- rknp-pesto's exchange, against a real socket ----

// Runs exchange(path, request) on a thread while the socket is served
// here; the reply as parse_reply reads it.
cmd::pesto::Reply ask(cmd::ControlSocket &s, const std::string &path,
                      const std::string &request) {
    std::string bytes, failure;
    std::atomic<bool> finished{false};
    std::thread client([&] {
        try {
            bytes = pesto_cmd::exchange(path, request, 5000);
        } catch (const cmd::Failure &f) {
            failure = f.what();
        }
        finished = true;
    });
    pump(s, 6000, [&] { return finished.load(); });
    client.join();
    REQUIRE(failure == "");
    return cmd::pesto::parse_reply(bytes);
}

TEST_CASE("pesto exchange: a request applied, an error carried back") {
    TempDir dir;
    std::string path = dir.path() + "/pasta.sock";
    Rig r;
    cmd::ControlSocket s(path, r.server, "-c/--conf-path");
    auto ok = ask(s, path, cmd::pesto::format_request({add_tcp("0.0.0.0/8080")}));
    CHECK(ok.ok);
    CHECK(r.backend.list() == std::set<std::string>{"tcp 0.0.0.0:8080->10.0.2.100:8080"});
    auto again = ask(s, path, cmd::pesto::format_request({add_tcp("0.0.0.0/8080")}));
    CHECK(!again.ok);
    CHECK(again.message == "tcp 0.0.0.0 port 8080 is forwarded already (to port 8080)");
    // A client of another version hears so, in both versions' words.
    auto newer = ask(s, path, "rknp-pesto 2\nadd tcp 0.0.0.0/9090\nend\n");
    CHECK(!newer.ok);
    CHECK(newer.message == "bad request: protocol version 2 is not supported: this rknp-pasta "
                           "speaks version 1 (run the rknp-pesto of the same rknp "
                           "release)");
    // Hopeless bytes are answered before the client finishes sending.
    auto junk = ask(s, path, "GET / HTTP/1.1\r\n" + std::string(100000, 'x'));
    CHECK(!junk.ok);
    CAPTURE(junk.message);
    CHECK(junk.message.starts_with("bad request: not an rknp-pesto request"));
    CHECK(r.backend.held.size() == 1);
}

TEST_CASE("pesto exchange: a missing or dead socket is named") {
    TempDir dir;
    std::string path = dir.path() + "/pasta.sock";
    std::string what;
    try {
        pesto_cmd::exchange(path, "x", 1000);
    } catch (const cmd::Failure &f) {
        what = f.what();
    }
    CHECK(what == path + ": No such file or directory (is rknp-pasta running with -c " +
                      path + "?)");
    { // stale: bound, never listened on
        cmd::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM, 0));
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
        REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
    }
    try {
        pesto_cmd::exchange(path, "x", 1000);
    } catch (const cmd::Failure &f) {
        what = f.what();
    }
    CHECK(what == path + ": Connection refused (nobody serves it: the rknp-pasta "
                         "that made it is gone)");
}

} // namespace
