// SPDX-License-Identifier: Apache-2.0

// Command line of rknp-slirp4netns: slirp4netns 1.2's options, defaults,
// messages and exit codes (--help, --version, usage errors).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace s4n {

struct Options {
    std::string tapname;                      // argv[optind + 1]
    pid_t target_pid = 0;                     // argv[optind], --netns-type=pid
    std::optional<std::string> netns_path;    // argv[optind], --netns-type=path
    std::optional<std::string> userns_path;   // --userns-path
    std::optional<std::string> cidr;          // --cidr
    std::optional<std::string> api_socket;    // -a
    std::optional<std::string> outbound_addr; // --outbound-addr
    std::optional<std::string> outbound_addr6;
    std::optional<std::string> macaddress;    // --macaddress (needs -c)
    int exit_fd = -1;                         // -e
    int ready_fd = -1;                        // -r
    unsigned mtu = 1500;                      // -m (slirp4netns' default)
    bool configure = false;                   // -c
    bool disable_host_loopback = false;
    bool enable_ipv6 = false;                 // -6
    bool enable_sandbox = false;
    bool enable_seccomp = false;
    bool disable_dns = false;
};

// Parses argv like slirp4netns 1.2: on a usage error prints the message
// (stderr) and the usage (stdout) and exits 1; --help and --version print
// and exit 0. Warnings slirp4netns prints go to stdout as there.
Options parse_args(int argc, char *const argv[]);

} // namespace s4n
