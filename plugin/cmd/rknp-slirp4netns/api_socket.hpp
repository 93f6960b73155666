// SPDX-License-Identifier: Apache-2.0

// slirp4netns' JSON API on a unix stream socket (--api-socket): one request
// per connection, add_hostfwd / list_hostfwd / remove_hostfwd mapped onto
// rknp's port forwards, with slirp4netns' replies and error texts.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rknp.h"
#include "cmd/common/unique_fd.hpp"

namespace s4n {

// The request handling alone (no socket): one JSON text in, one reply out.
class HostFwdApi {
public:
    HostFwdApi(rknp_parent *parent, std::string default_guest)
        : parent_(parent), default_guest_(std::move(default_guest)) {}
    std::string handle(std::string_view request);

private:
    struct Entry {
        int id;
        uint32_t rknp_id;
        bool udp;
        std::string host_addr;
        int host_port;
        std::string guest_addr;
        int guest_port;
    };
    template <class Json> std::string add(const Json &req);
    template <class Json> std::string remove(const Json &req);
    std::string list() const;

    rknp_parent *parent_;
    std::string default_guest_;
    std::vector<Entry> entries_;
    int next_id_ = 1;
};

// The listening socket plus HostFwdApi. Binding replaces a stale socket
// file, as slirp4netns does.
class ApiSocket {
public:
    ApiSocket(const std::string &path, rknp_parent *parent,
              std::string default_guest); // throws cmd::Failure
    ~ApiSocket();
    ApiSocket(const ApiSocket &) = delete;
    ApiSocket &operator=(const ApiSocket &) = delete;

    int fd() const { return listen_.get(); }
    // Accepts one connection, answers it and closes it. Never throws: a
    // bad client only costs its own connection.
    void serve_one();

private:
    std::string path_;
    cmd::UniqueFd listen_;
    HostFwdApi api_;
};

} // namespace s4n
