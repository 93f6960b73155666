// SPDX-License-Identifier: Apache-2.0

// Command line of rknp-pesto: pesto's options as Podman 6
// (`--add|--delete -t 0.0.0.0/8080 -t [::]/8080 SOCK`) and rootlesskit's
// pesto port driver (`-A|-D --tcp-ports=IP/hp:cp SOCK`) pass them, plus
// --help and --version. pesto's options rknp-pesto cannot honour are
// refused by name; unknown ones with getopt's "unrecognized option".
#pragma once

#include <string>
#include <vector>

#include "cmd/common/pesto_protocol.hpp"

namespace pesto_cmd {

struct Options {
    std::vector<cmd::pesto::Change> changes; // in the order given
    std::string socket;                      // PATH operand
    bool debug = false;                      // -d: the exchange on stderr
};

// Parses argv like pesto: -A/-D switch the mode of the -t/-u specs that
// follow them. --help and --version print and exit 0; a usage error or a
// bad spec prints "rknp-pesto: ..." on stderr and exits 1.
Options parse_args(int argc, char *const argv[]);

} // namespace pesto_cmd
