// SPDX-License-Identifier: Apache-2.0

// slirp4netns' API requests (add_hostfwd / list_hostfwd / remove_hostfwd)
// on rknp's port forwards: one JSON text in, one reply out, with
// slirp4netns' replies and error texts. No socket here (api_socket.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rknp.h"

namespace s4n {

// Where the forwards go: rknp's parent in the command, a fake in the unit
// tests. On failure: false and a message for the log.
class ForwardBackend {
public:
    virtual ~ForwardBackend() = default;
    virtual bool add(const rknp_forward &f, uint32_t &id, std::string &error) = 0;
    virtual bool remove(uint32_t id, std::string &error) = 0;
};

class RknpForwards final : public ForwardBackend {
public:
    explicit RknpForwards(rknp_parent *parent) : parent_(parent) {}
    bool add(const rknp_forward &f, uint32_t &id, std::string &error) override;
    bool remove(uint32_t id, std::string &error) override;

private:
    rknp_parent *parent_;
};

struct HostFwdLimits {
    // Every forward holds a host socket and an entry that list_hostfwd
    // prints (about 110 bytes: the list of 4096 is under 500 KB) and that
    // add and remove scan. 4096 is above what port publishing does in
    // practice (rootlesskit asks for one forward per port and protocol:
    // a few port ranges of a thousand) and keeps all of that small.
    std::size_t max_forwards = 4096;
    // add_hostfwd is refused unless this many more fds can be opened under
    // RLIMIT_NOFILE: the guest's flows, the API's clients and libslirp
    // need them more than one more forward does.
    int fd_reserve = 64;
};

// How many more fds the process can open now, counting up to `want` (so
// at most `want` dups, closed at once).
int spare_fds(int want);

class HostFwdApi {
public:
    HostFwdApi(ForwardBackend &backend, std::string default_guest,
               HostFwdLimits limits = {})
        : backend_(backend), default_guest_(std::move(default_guest)),
          limits_(limits) {}
    // request: the bytes read (parsed up to the first NUL, as parson sees
    // them).
    std::string handle(std::string_view request);
    std::size_t forwards() const { return entries_.size(); }

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

    ForwardBackend &backend_;
    std::string default_guest_;
    HostFwdLimits limits_;
    std::vector<Entry> entries_;
    int next_id_ = 1;
};

// {"error":{"desc":DESC}}, slirp4netns' error reply.
std::string error_reply(const std::string &desc);

} // namespace s4n
