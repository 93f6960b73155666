// SPDX-License-Identifier: Apache-2.0

// The table of active forwards (see forward_table.hpp).
#include "parent/forward_table.hpp"

#include <string>

#include "common/error.hpp"

namespace rknp {

void ForwardTable::check_new(const ForwardSpec &s) const {
    for (const auto &[id, f] : fwds_)
        if (f.same_host_side(s))
            throw_invalid(s.host_side() + " is already forwarded (id " +
                          std::to_string(id) + ")");
}

uint32_t ForwardTable::insert(const ForwardSpec &s) {
    uint32_t id = next_id_++;
    fwds_.emplace(id, s);
    return id;
}

const ForwardSpec &ForwardTable::at(uint32_t id) const {
    auto it = fwds_.find(id);
    if (it == fwds_.end())
        throw_invalid("no forward with id " + std::to_string(id));
    return it->second;
}

void ForwardTable::erase(uint32_t id) { fwds_.erase(id); }

} // namespace rknp
