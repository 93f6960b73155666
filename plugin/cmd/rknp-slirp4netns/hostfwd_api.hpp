// SPDX-License-Identifier: Apache-2.0

// slirp4netns' API requests (add_hostfwd / list_hostfwd / remove_hostfwd)
// on rknp's port forwards: one JSON text in, one reply out, with
// slirp4netns' replies and error texts; the protocol the command's
// control socket (cmd::ControlSocket) speaks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cmd/common/control_protocol.hpp"
#include "cmd/common/forward_backend.hpp"
#include "rknp.h"

namespace s4n {

class HostFwdApi final : public cmd::ControlProtocol {
public:
    HostFwdApi(cmd::ForwardBackend &backend, std::string default_guest,
               cmd::ForwardLimits limits = {})
        : backend_(backend), default_guest_(std::move(default_guest)),
          limits_(limits) {}
    // request: the bytes read (parsed up to the first NUL, as parson sees
    // them).
    std::string handle(std::string_view request);
    std::size_t forwards() const { return entries_.size(); }

    // The socket's side: slirp4netns's log lines ("api_handler: ..."), its
    // framing (api_request.hpp) and its replies.
    const char *tag() const override { return "api_handler"; }
    // slirp4netns reads into a 4096-byte buffer: that much or more is "too
    // large".
    std::size_t max_request() const override { return 4096; }
    cmd::RequestState state(std::string_view bytes) const override;
    std::string answer(std::string_view bytes) override;
    std::string too_large(std::string_view bytes) override;

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

    cmd::ForwardBackend &backend_;
    std::string default_guest_;
    cmd::ForwardLimits limits_;
    std::vector<Entry> entries_;
    int next_id_ = 1;
};

// {"error":{"desc":DESC}}, slirp4netns' error reply.
std::string error_reply(const std::string &desc);

} // namespace s4n
