// SPDX-License-Identifier: Apache-2.0

// pasta's port specifications (-t, -u, -T, -U), parsed: "none", "auto", or
// [ADDR[%IFACE]/]PORTS where PORTS is a comma-separated list of N, N-M,
// N:G, N-M:G-H and exclusions ~N, ~N-M; a mapping may name the address it
// goes to in the namespace, N:TARGET/G or N-M:TARGET/G-H (IPv4, or IPv6
// bracketed or not), as Podman's pesto does for a container on a bridge
// network behind the namespace (0.0.0.0/8080:10.89.0.2/80). rknp-pasta's options and
// rknp-pesto's requests both take them. Pure but for
// host_ephemeral_range(): no system calls, so unit tests cover every form.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cmd {

enum class PortMode { none, automatic, list };

struct PortMapping {
    uint16_t host;  // the port bound on the host
    uint16_t guest; // the port it reaches in the namespace
    bool operator==(const PortMapping &) const = default;
};

struct PortSpec {
    PortMode mode = PortMode::none;
    std::string address; // IPv4 or IPv6 literal, no brackets; "": any
    std::string ifname;  // after '%'; "": any
    // The address the mappings go to in the namespace, no brackets; "":
    // the namespace's own. One a spec: its items name the same or none.
    std::string target;
    std::vector<PortMapping> mappings; // mode list: ascending host ports
};

// The host's ephemeral range (net.ipv4.ip_local_port_range), which a spec
// of exclusions only ("~20000-20010": every other port) leaves out.
struct PortRange {
    uint16_t first = 32768;
    uint16_t last = 60999;
};

// The host's net.ipv4.ip_local_port_range (the defaults above when it
// cannot be read): read it before the sandbox hides /proc.
PortRange host_ephemeral_range();

class PortSpecError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Parses one option argument. Throws PortSpecError with a message that
// names the spec and what is wrong with it.
PortSpec parse_port_spec(std::string_view spec, PortRange ephemeral = {});

} // namespace cmd
