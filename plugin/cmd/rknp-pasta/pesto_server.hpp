// SPDX-License-Identifier: Apache-2.0

// rknp-pasta's side of the pesto protocol (cmd/common/pesto_protocol.hpp):
// a request's port specs applied to rknp's forwards, all or none, and the
// reply. What the -c socket (cmd::ControlSocket) speaks. Forwards go from
// the host to the namespace's address; the table is rknp-pasta's one
// (forward_table.hpp): a delete removes a forward of the command line or
// of "auto" as much as one the socket added.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cmd/common/control_protocol.hpp"
#include "cmd/common/forward_backend.hpp"
#include "cmd/common/pesto_protocol.hpp"
#include "cmd/common/port_spec.hpp"
#include "forward_table.hpp"

namespace pasta {

class PestoServer final : public cmd::ControlProtocol {
public:
    // table: every forward in force (shared with PortForwarder).
    // guest_addr: the namespace's IPv4 address. ipv6: a spec without an
    // address is bound on "::" too (as -t/-u are). ephemeral: the host's
    // range, for specs of exclusions only.
    PestoServer(ForwardTable &table, cmd::ForwardBackend &backend, std::string guest_addr,
                bool ipv6, cmd::PortRange ephemeral, cmd::ForwardLimits limits = {});

    const char *tag() const override { return "rknp-pasta: -c socket"; }
    std::size_t max_request() const override { return cmd::pesto::kMaxRequest; }
    cmd::RequestState state(std::string_view bytes) const override;
    std::string answer(std::string_view bytes) override;
    std::string too_large(std::string_view bytes) override;

    // Applies the changes in order, all or none: "" on success, else why.
    std::string apply(const std::vector<cmd::pesto::Change> &changes);
    std::size_t forwards() const { return table_.size(); }
    using Forward = pasta::Forward;

private:
    // One forward a change names. optional: the "::" of a spec without an
    // address, which a host without IPv6 cannot bind (as for -t/-u).
    struct Step {
        cmd::pesto::Op op;
        Forward fwd;
        bool optional;
    };
    std::string expand(const cmd::pesto::Change &c, std::vector<Step> &steps,
                       std::size_t &adds) const;
    std::string run(const Step &s, Step &done, bool &did);
    std::string undo(const Step &done);
    ForwardTable::Iter find(const Forward &f);

    ForwardTable &table_;
    cmd::ForwardBackend &backend_;
    std::string guest_addr_;
    bool ipv6_;
    cmd::PortRange ephemeral_;
    cmd::ForwardLimits limits_;
};

} // namespace pasta
