// SPDX-License-Identifier: Apache-2.0

// The table of active port forwards, by id. It is touched only under
// Parent's forward mutex; the paths and libslirp get each forward on the
// stack thread (StackLoop::add_forward / remove_forward).
#pragma once

#include <cstdint>
#include <map>

#include "datapath/forward_spec.hpp"

namespace rknp {

class ForwardTable {
public:
    // Throws Error(RKNP_ERR_INVALID_ARGUMENT) for a duplicate host side.
    void check_new(const ForwardSpec &s) const;
    uint32_t insert(const ForwardSpec &s);
    // Throws Error(RKNP_ERR_INVALID_ARGUMENT) for an unknown id.
    const ForwardSpec &at(uint32_t id) const;
    void erase(uint32_t id);
    void clear() { fwds_.clear(); }
    const std::map<uint32_t, ForwardSpec> &all() const { return fwds_; }

private:
    std::map<uint32_t, ForwardSpec> fwds_;
    uint32_t next_id_ = 1;
};

} // namespace rknp
