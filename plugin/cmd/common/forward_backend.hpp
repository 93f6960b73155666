// SPDX-License-Identifier: Apache-2.0

// Where a control socket's port forwards go (rknp's parent in the
// commands, a fake in the unit tests), and the limits every such socket
// keeps: a cap on forwards and a reserve of fds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "rknp.h"

namespace cmd {

// On failure: false and the library's message.
class ForwardBackend {
public:
    virtual ~ForwardBackend() = default;
    virtual bool add(const rknp_forward &f, uint32_t &id, std::string &error) = 0;
    virtual bool remove(uint32_t id, std::string &error) = 0;
};

// rknp_parent_add_forward / rknp_parent_remove_forward.
class RknpForwards final : public ForwardBackend {
public:
    explicit RknpForwards(rknp_parent *parent) : parent_(parent) {}
    bool add(const rknp_forward &f, uint32_t &id, std::string &error) override;
    bool remove(uint32_t id, std::string &error) override;

private:
    rknp_parent *parent_;
};

struct ForwardLimits {
    // Every forward holds a host socket and an entry that a list prints
    // (about 110 bytes: the list of 4096 is under 500 KB) and that add and
    // remove scan. 4096 is above what port publishing does in practice
    // (rootlesskit asks for one forward per port and protocol: a few port
    // ranges of a thousand) and keeps all of that small.
    std::size_t max_forwards = 4096;
    // A forward is refused unless this many more fds can be opened under
    // RLIMIT_NOFILE: the guest's flows, the socket's clients and libslirp
    // need them more than one more forward does.
    int fd_reserve = 64;
};

// How many more fds the process can open now, counting up to `want` (so
// at most `want` dups, closed at once).
int spare_fds(int want);

} // namespace cmd
