// SPDX-License-Identifier: Apache-2.0

// slirp4netns' JSON API on a unix stream socket (--api-socket): one request
// per connection, add_hostfwd / list_hostfwd / remove_hostfwd mapped onto
// rknp's port forwards, with slirp4netns' replies and error texts.
#include "api_socket.hpp"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cmd/common/errors.hpp"
#include "cmd/common/monotonic.hpp"
#include "cmd/common/rknp_handle.hpp"

namespace s4n {

namespace {

using Json = nlohmann::ordered_json;

constexpr size_t kMaxRequest = 4096; // slirp4netns' buffer
constexpr int kReadTimeoutMs = 2000;

std::string error_reply(const std::string &desc) {
    return Json{{"error", {{"desc", desc}}}}.dump();
}

// parson's json_object_dotget_string: NULL unless "arguments.NAME" is a
// string inside an "arguments" object.
const std::string *arg_string(const Json &req, const char *name) {
    auto a = req.find("arguments");
    if (a == req.end() || !a->is_object()) return nullptr;
    auto v = a->find(name);
    if (v == a->end() || !v->is_string()) return nullptr;
    return v->template get_ptr<const std::string *>();
}

// (int)json_object_dotget_number(...): 0 unless a number; values an int
// cannot hold become INT_MIN, as the x86 conversion slirp4netns relies on.
int arg_int(const Json &req, const char *name) {
    auto a = req.find("arguments");
    if (a == req.end() || !a->is_object()) return 0;
    auto v = a->find(name);
    if (v == a->end() || !v->is_number()) return 0;
    double d = v->template get<double>();
    if (!std::isfinite(d) || d >= 2147483648.0 || d <= -2147483649.0)
        return INT_MIN;
    return int(d);
}

bool parse_ipv4(const std::string &s, std::string &canonical) {
    in_addr a{};
    if (inet_pton(AF_INET, s.c_str(), &a) != 1) return false;
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a, buf, sizeof buf);
    canonical = buf;
    return true;
}

// parson parses the first JSON value and ignores what follows; so does
// nlohmann's stream extraction (a text may end at its first NUL, too).
bool parse_first_value(std::string_view text, Json &out) {
    std::string s(text.substr(0, text.find('\0')));
    std::istringstream in(s);
    try {
        in >> out;
        return true;
    } catch (const Json::exception &) {
        return false;
    }
}

} // namespace

std::string HostFwdApi::handle(std::string_view request) {
    Json req;
    if (!parse_first_value(request, req))
        return error_reply("bad request: cannot parse JSON");
    if (!req.is_object())
        return error_reply("bad request: json_object() failed");
    auto ex = req.find("execute");
    if (ex == req.end() || !ex->is_string())
        return error_reply("bad request: no execute found");
    const std::string &execute = ex->get_ref<const std::string &>();
    if (execute == "add_hostfwd") return add(req);
    if (execute == "list_hostfwd") return list();
    if (execute == "remove_hostfwd") return remove(req);
    return error_reply("bad request: unknown execute");
}

template <class J> std::string HostFwdApi::add(const J &req) {
    const std::string pre = "bad request: add_hostfwd: ";
    Entry e{};
    const std::string *proto = arg_string(req, "proto");
    if (proto && *proto == "udp")
        e.udp = true;
    else if (proto && *proto == "tcp")
        e.udp = false;
    else
        return error_reply(pre + "bad arguments.proto");
    const std::string *host = arg_string(req, "host_addr");
    std::string host_s = host && !host->empty() ? *host : "0.0.0.0";
    if (!parse_ipv4(host_s, e.host_addr))
        return error_reply(pre + "bad arguments.host_addr");
    e.host_port = arg_int(req, "host_port");
    if (e.host_port == 0) return error_reply(pre + "bad arguments.host_port");
    const std::string *guest = arg_string(req, "guest_addr");
    if (!guest || guest->empty())
        e.guest_addr = default_guest_;
    else if (!parse_ipv4(*guest, e.guest_addr))
        return error_reply(pre + "bad arguments.guest_addr");
    e.guest_port = arg_int(req, "guest_port");
    if (e.guest_port == 0) return error_reply(pre + "bad arguments.guest_port");

    rknp_forward fwd{};
    rknp_forward_init(&fwd, sizeof fwd);
    fwd.protocol = e.udp ? RKNP_PROTO_UDP : RKNP_PROTO_TCP;
    fwd.host_addr = e.host_addr.c_str();
    fwd.host_port = uint32_t(e.host_port);
    fwd.guest_port = uint32_t(e.guest_port);
    fwd.guest_addr = e.guest_addr.c_str();
    // rknp checks what libslirp does not (port range, guest address inside
    // the network); every refusal reads as slirp_add_hostfwd's failure.
    bool ranges_ok = e.host_port > 0 && e.host_port <= 65535 &&
                     e.guest_port > 0 && e.guest_port <= 65535;
    rknp_error *err = nullptr;
    if (!ranges_ok ||
        rknp_parent_add_forward(parent_, &fwd, &e.rknp_id, &err) != RKNP_OK) {
        std::fprintf(stderr, "api_handler: add_hostfwd: %s\n",
                     ranges_ok ? rknp_error_message(err) : "port out of range");
        rknp_error_free(err);
        return error_reply(pre + "slirp_add_hostfwd failed");
    }
    e.id = next_id_++;
    entries_.push_back(e);
    return Json{{"return", {{"id", e.id}}}}.dump();
}

std::string HostFwdApi::list() const {
    Json arr = Json::array();
    for (const Entry &e : entries_)
        arr.push_back(Json{{"id", e.id},
                           {"proto", e.udp ? "udp" : "tcp"},
                           {"host_addr", e.host_addr},
                           {"host_port", e.host_port},
                           {"guest_addr", e.guest_addr},
                           {"guest_port", e.guest_port}});
    return Json{{"entries", arr}}.dump();
}

template <class J> std::string HostFwdApi::remove(const J &req) {
    int id = arg_int(req, "id");
    auto it = std::find_if(entries_.begin(), entries_.end(),
                           [id](const Entry &e) { return e.id == id; });
    if (it == entries_.end())
        return error_reply("bad request: remove_hostfwd: bad arguments.id");
    rknp_error *err = nullptr;
    if (rknp_parent_remove_forward(parent_, it->rknp_id, &err) != RKNP_OK) {
        std::fprintf(stderr, "api_handler: remove_hostfwd: %s\n",
                     rknp_error_message(err));
        rknp_error_free(err);
        return error_reply(
            "bad request: remove_hostfwd: slirp_remove_hostfwd failed");
    }
    entries_.erase(it);
    return Json{{"return", Json::object()}}.dump();
}

ApiSocket::ApiSocket(const std::string &path, rknp_parent *parent,
                     std::string default_guest)
    : path_(path), api_(parent, std::move(default_guest)) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path)
        throw cmd::Failure("the specified API socket path is too long (>= " +
                      std::to_string(sizeof addr.sun_path) + ")");
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    ::unlink(path.c_str()); // avoid EADDRINUSE, as slirp4netns
    listen_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!listen_) throw cmd::sys_failure("api socket: socket");
    if (::bind(listen_.get(), reinterpret_cast<sockaddr *>(&addr),
               sizeof addr) < 0)
        throw cmd::sys_failure("api socket: bind " + path);
    if (::listen(listen_.get(), 16) < 0)
        throw cmd::sys_failure("api socket: listen");
}

ApiSocket::~ApiSocket() {
    // Inside --enable-sandbox the path may be out of reach (slirp4netns
    // leaves the file there too).
    ::unlink(path_.c_str());
}

void ApiSocket::serve_one() {
    cmd::UniqueFd conn(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn) {
        std::perror("api_handler: accept");
        return;
    }
    // Read until EOF, a complete JSON value, the size limit or a deadline,
    // so neither split writes nor an idle client wedge the process.
    std::string buf;
    long start = cmd::now_ms();
    Json probe;
    for (;;) {
        long elapsed = cmd::now_ms() - start;
        pollfd p{conn.get(), POLLIN, 0};
        int r = ::poll(&p, 1, int(std::max(0L, kReadTimeoutMs - elapsed)));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        char chunk[kMaxRequest];
        ssize_t n = ::recv(conn.get(), chunk, kMaxRequest - buf.size(), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        buf.append(chunk, size_t(n));
        if (buf.size() >= kMaxRequest || parse_first_value(buf, probe)) break;
    }
    std::string reply;
    if (buf.size() >= kMaxRequest) {
        std::fprintf(stderr, "api_handler: too large message (>= %zu bytes)\n",
                     buf.size());
        reply = error_reply("bad request: too large message");
    } else {
        std::fprintf(stderr, "api_handler: got request: %s\n", buf.c_str());
        reply = api_.handle(buf);
    }
    size_t off = 0;
    while (off < reply.size()) {
        ssize_t n = ::send(conn.get(), reply.data() + off, reply.size() - off,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        off += size_t(n);
    }
    ::shutdown(conn.get(), SHUT_RDWR);
}

} // namespace s4n
