// SPDX-License-Identifier: Apache-2.0

// slirp4netns' API requests on rknp's port forwards (hostfwd_api.hpp).
#include "hostfwd_api.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "api_request.hpp"

namespace s4n {

namespace {

using Json = nlohmann::ordered_json;

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
// nlohmann's stream extraction.
bool parse_first_value(std::string_view text, Json &out) {
    std::istringstream in{std::string(text)};
    try {
        in >> out;
        return true;
    } catch (const Json::exception &) {
        return false;
    }
}

} // namespace

std::string error_reply(const std::string &desc) {
    return Json{{"error", {{"desc", desc}}}}.dump();
}

cmd::RequestState HostFwdApi::state(std::string_view bytes) const {
    return request_state(bytes);
}

std::string HostFwdApi::answer(std::string_view bytes) {
    std::fprintf(stderr, "api_handler: got request: %.*s\n",
                 int(request_text(bytes).size()), request_text(bytes).data());
    return handle(bytes);
}

// As slirp4netns: whatever the bytes were.
std::string HostFwdApi::too_large(std::string_view) {
    std::fprintf(stderr, "api_handler: too large message (>= %zu bytes)\n",
                 max_request());
    return error_reply("bad request: too large message");
}

std::string HostFwdApi::handle(std::string_view request) {
    Json req;
    if (!parse_first_value(request_text(request), req))
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

    // rknp checks what libslirp does not (port range, guest address inside
    // the network); every refusal reads as slirp_add_hostfwd's failure.
    if (e.host_port <= 0 || e.host_port > 65535 || e.guest_port <= 0 ||
        e.guest_port > 65535) {
        std::fprintf(stderr, "api_handler: add_hostfwd: port out of range\n");
        return error_reply(pre + "slirp_add_hostfwd failed");
    }
    // slirp4netns has neither limit; its wording for the refusals.
    if (entries_.size() >= limits_.max_forwards) {
        std::fprintf(stderr, "api_handler: add_hostfwd: refused: %zu forwards\n",
                     entries_.size());
        return error_reply(pre + "too many forwards (max " +
                           std::to_string(limits_.max_forwards) + ")");
    }
    if (int spare = cmd::spare_fds(limits_.fd_reserve); spare < limits_.fd_reserve) {
        std::fprintf(stderr,
                     "api_handler: add_hostfwd: refused: %d file descriptors "
                     "left under RLIMIT_NOFILE, %d kept in reserve\n",
                     spare, limits_.fd_reserve);
        return error_reply(pre + "too few file descriptors left");
    }

    rknp_forward fwd{};
    rknp_forward_init(&fwd, sizeof fwd);
    fwd.protocol = e.udp ? RKNP_PROTO_UDP : RKNP_PROTO_TCP;
    fwd.host_addr = e.host_addr.c_str();
    fwd.host_port = uint32_t(e.host_port);
    fwd.guest_port = uint32_t(e.guest_port);
    fwd.guest_addr = e.guest_addr.c_str();
    std::string error;
    if (!backend_.add(fwd, e.rknp_id, error)) {
        std::fprintf(stderr, "api_handler: add_hostfwd: %s\n", error.c_str());
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
    std::string error;
    if (!backend_.remove(it->rknp_id, error)) {
        std::fprintf(stderr, "api_handler: remove_hostfwd: %s\n", error.c_str());
        return error_reply(
            "bad request: remove_hostfwd: slirp_remove_hostfwd failed");
    }
    entries_.erase(it);
    return Json{{"return", Json::object()}}.dump();
}

} // namespace s4n
