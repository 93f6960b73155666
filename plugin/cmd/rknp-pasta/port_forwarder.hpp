// SPDX-License-Identifier: Apache-2.0

// pasta's -t/-u forwards on an rknp parent: explicit port lists bound at
// start (a port that cannot be bound is fatal, as in pasta), and "auto":
// every port the namespace listens on, from /proc/net files opened inside
// it, forwarded from the same host port and rescanned every second
// (rootlesskit's implicit port driver relies on it). Every forward made
// goes into rknp-pasta's table (forward_table.hpp), where rknp-pesto may
// delete it: an "auto" port deleted so stays unforwarded until the
// namespace stops listening on it. With --host-lo-to-ns-lo, "auto" also
// serves the ports the namespace listens on only at its loopback: the
// host's loopback at the same port is relayed to them (LoopbackRelay),
// so that the namespace sees its client come from its own loopback.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cli.hpp"
#include "cmd/common/forward_backend.hpp"
#include "cmd/common/unique_fd.hpp"
#include "cmd/common/port_spec.hpp"
#include "forward_table.hpp"
#include "loopback_relay.hpp"
#include "rknp.h"

namespace pasta {

using cmd::PortMode;
using cmd::PortRange;
using cmd::PortSpec;

// Parses one option's specs (-t, -u, -T, -U: several accumulate) into
// port lists and "auto"; throws cmd::Failure naming the option for a bad
// spec, an interface (%IFACE) or "none" beside others.
void parse_port_option(const std::vector<std::string> &specs, const char *option,
                       PortRange eph, std::vector<PortSpec> &lists, bool &automatic);

class PortForwarder {
public:
    // Parses -t and -u (throws cmd::Failure naming the option). ipv6:
    // also bind "::" where no address is given.
    // table: where the forwards made are kept (shared with PestoServer).
    PortForwarder(const Options &o, bool ipv6, ForwardTable &table);

    // The /proc files "auto" needs, to be opened in the namespace.
    std::vector<std::string> netns_files() const;
    // Those files, in the same order (ChildProcess::take_netns_files).
    void set_netns_files(std::vector<cmd::UniqueFd> fds);

    // Binds every explicit mapping; throws cmd::Failure naming the first
    // one that fails.
    void bind_explicit(cmd::ForwardBackend &fw);
    // Reads the namespace's listening ports and adds and removes "auto"
    // forwards (and, with --host-lo-to-ns-lo, relays on relay) to match.
    // false once the files cannot be read (the namespace is gone).
    bool rescan(cmd::ForwardBackend &fw, LoopbackRelay &relay);
    bool scans() const { return !scan_.empty(); }
    // Whether any TCP forward may be made (-t is not none).
    bool forwards_tcp() const { return tcp_.automatic || !tcp_.lists.empty(); }
    // Whether rescan needs sockets inside the namespace (NsSockets).
    bool relays_to_ns() const { return lo_to_lo_ && scans(); }

private:
    struct Kind {
        uint32_t proto;         // RKNP_PROTO_*
        std::vector<PortSpec> lists;
        bool automatic = false;
    };
    struct Scan {
        uint32_t proto;
        std::string path;       // /proc/thread-self/net/tcp, ...
        cmd::UniqueFd fd;
    };
    // Adds the forward, or returns false with the library's message.
    // target: the address in the namespace ("": its own).
    bool add(cmd::ForwardBackend &fw, uint32_t proto, const std::string &host_addr,
             uint16_t host_port, uint16_t guest_port, const std::string &target,
             uint32_t &id, std::string &error);

    Kind tcp_{RKNP_PROTO_TCP, {}, false}, udp_{RKNP_PROTO_UDP, {}, false};
    // --host-lo-to-ns-lo's relays made by rescan: (proto, port) -> whether
    // the host's loopback could be bound.
    void relay_loopback_only(const std::set<std::pair<uint32_t, unsigned>> &lo,
                             LoopbackRelay &relay);

    bool ipv6_;
    bool lo_to_lo_;
    ForwardTable &table_;
    std::vector<Scan> scan_;
    // "auto" ports tried: (proto, port) -> the ids made (one per host
    // address); those no longer in table_ were deleted by rknp-pesto.
    std::map<std::pair<uint32_t, unsigned>, std::vector<uint32_t>> auto_;
    std::map<std::pair<uint32_t, unsigned>, bool> lo_;
    std::string text_; // rescan's buffer, reused
};

} // namespace pasta
