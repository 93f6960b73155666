// SPDX-License-Identifier: Apache-2.0

// pasta's -T/-U (--tcp-ns, --udp-ns): which ports of the namespace's
// loopback reach the host's loopback, on a LoopbackRelay. Explicit lists
// are bound at start (a port that cannot be bound is fatal, as for -t);
// "auto" forwards every port the host listens on at its loopback or at
// any address, read from the host's /proc/net files, rescanned every
// second as pasta does, leaving out the ports rknp-pasta's own forwards
// hold (-t/-u/auto/rknp-pesto: the host side of those reaches the
// namespace already) and, for UDP, the host's ephemeral range (the stack's
// own unconnected sockets live there).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cli.hpp"
#include "cmd/common/port_spec.hpp"
#include "cmd/common/unique_fd.hpp"
#include "forward_table.hpp"
#include "loopback_relay.hpp"

namespace pasta {

class NsForwarder {
public:
    // Parses -T and -U (throws cmd::Failure naming the option). Not given
    // means none (pasta's default is auto; Podman passes none anyway).
    // ipv6: also listen on ::1 where no address is given.
    NsForwarder(const Options &o, bool ipv6);

    // Whether any port or "auto" is asked for: only then does rknp-pasta
    // enter the namespace for sockets.
    bool active() const;
    bool scans() const { return !scan_.empty(); }

    // Opens the host's /proc/net files "auto" reads; call on a thread in
    // the host's namespace before the sandbox hides /proc. Throws.
    void open_host_files();

    // Listens on every explicit port; throws cmd::Failure naming the first
    // that fails.
    void bind_explicit(LoopbackRelay &relay);
    // Reads the host's listening ports and listens and stops listening to
    // match. false once the files cannot be read.
    bool rescan(LoopbackRelay &relay, const ForwardTable &own);

private:
    struct Kind {
        int proto;                     // IPPROTO_TCP, IPPROTO_UDP
        const char *option;
        std::vector<cmd::PortSpec> lists;
        bool automatic = false;
    };
    struct Scan {
        int proto;
        std::string path;
        cmd::UniqueFd fd;
    };
    // The families to listen on for a spec's address ("" both, unless -4).
    std::vector<int> families(const cmd::PortSpec &spec) const;

    Kind tcp_{IPPROTO_TCP, "-T/--tcp-ns", {}, false};
    Kind udp_{IPPROTO_UDP, "-U/--udp-ns", {}, false};
    bool ipv6_;
    cmd::PortRange ephemeral_;
    std::vector<Scan> scan_;
    // "auto" ports tried: (proto, port) -> listening (false: the bind
    // failed, e.g. the namespace uses the port; tried again once the host
    // stops and starts listening).
    std::map<std::pair<int, unsigned>, bool> auto_;
    std::string text_; // rescan's buffer, reused
};

} // namespace pasta
