// SPDX-License-Identifier: Apache-2.0

// Command line of rknp-pesto (see cli.hpp).
#include "cli.hpp"

#include <getopt.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "cmd/common/port_spec.hpp"
#include "cmd/common/errors.hpp"
#include "cmd/common/version.hpp"

namespace pesto_cmd {

namespace {

using cmd::usage_error;
using cmd::pesto::Op;
using cmd::pesto::Proto;

void usage(const char *argv0) {
    std::printf(
        "Usage: %s [OPTION]... PATH\n"
        "pesto-compatible port control for rknp-pasta: adds and deletes port\n"
        "forwards of the rknp-pasta serving the unix socket PATH (its -c).\n\n"
        "  -A, --add               add the port specs that follow\n"
        "  -D, --delete            delete the port specs that follow\n"
        "  -t, --tcp-ports SPEC    a TCP port spec, as rknp-pasta's -t:\n"
        "                          [ADDR/]PORTS, PORTS a list of N, N-M, N:G,\n"
        "                          N-M:G-H, ~N, ~N-M; no ADDR: 0.0.0.0 and ::\n"
        "  -u, --udp-ports SPEC    the same for UDP\n"
        "  -d, --debug             print the request and the reply on stderr\n"
        "  -h, --help              display this help message and exit\n"
        "      --version           show version and exit\n\n"
        "The changes go to rknp-pasta as one request, applied in order, all\n"
        "or none. Exit status 0 once applied, 1 with a message otherwise.\n",
        argv0);
}

void version() {
    std::printf("rknp-pesto %s (pesto compatible, on rknp; protocol %u)\n",
                cmd::rknp_version(), cmd::pesto::kVersion);
    cmd::print_library_versions();
}

enum : int { kVersion = 1000 };

// A spec checked here as rknp-pasta will check it, so that a typo fails
// before anything is sent (rknp-pasta checks again: its range of
// ephemeral ports is the one that counts).
void check_spec(const char *option, const std::string &spec) {
    cmd::PortSpec parsed;
    try {
        parsed = cmd::parse_port_spec(spec, cmd::host_ephemeral_range());
    } catch (const cmd::PortSpecError &e) {
        usage_error(std::string(option) + ": " + e.what());
    }
    if (parsed.mode != cmd::PortMode::list)
        usage_error(std::string(option) + " " + spec +
                    ": 'none' and 'auto' are not forwards to add or delete "
                    "(name the ports)");
    if (!parsed.ifname.empty())
        usage_error(std::string(option) + " " + spec +
                    ": binding to an interface (%IFACE) is not supported");
}

} // namespace

Options parse_args(int argc, char *const argv[]) {
    const option longopts[] = {
        {"add", no_argument, nullptr, 'A'},
        {"delete", no_argument, nullptr, 'D'},
        {"tcp-ports", required_argument, nullptr, 't'},
        {"udp-ports", required_argument, nullptr, 'u'},
        {"debug", no_argument, nullptr, 'd'},
        {"help", no_argument, nullptr, 'h'},
        {"version", no_argument, nullptr, kVersion},
        // pesto's, not honoured: refused by name below.
        {"show", no_argument, nullptr, 's'},
        {"clear", required_argument, nullptr, 'C'},
        {nullptr, 0, nullptr, 0},
    };
    Options o;
    std::optional<Op> mode;
    int opt;
    while ((opt = getopt_long(argc, argv, "ADt:u:dhsC:", longopts, nullptr)) != -1) {
        switch (opt) {
        case 'A':
            mode = Op::add;
            break;
        case 'D':
            mode = Op::remove;
            break;
        case 't':
        case 'u': {
            const char *option = opt == 't' ? "-t/--tcp-ports" : "-u/--udp-ports";
            if (!mode)
                usage_error(std::string(option) + " " + optarg +
                            ": give -A/--add or -D/--delete before the port "
                            "specs (replacing the whole table is not supported "
                            "by rknp-pesto)");
            check_spec(option, optarg);
            o.changes.push_back({*mode, opt == 't' ? Proto::tcp : Proto::udp, optarg});
            break;
        }
        case 'd':
            o.debug = true;
            break;
        case 'h':
        case kVersion: // either prints and ends the run
            if (opt == 'h')
                usage(argv[0]);
            else
                version();
            std::exit(EXIT_SUCCESS);
        case 's':
            usage_error("option '-s/--show' is not supported by rknp-pesto");
        case 'C':
            usage_error("option '-C/--clear' is not supported by rknp-pesto");
        default: // getopt_long printed "unrecognized option '--x'" etc.
            std::exit(EXIT_FAILURE);
        }
    }
    if (argc - optind != 1)
        usage_error("give one PATH, the socket of rknp-pasta's -c");
    o.socket = argv[optind];
    if (o.changes.empty())
        usage_error("nothing to do: give -A/--add or -D/--delete and -t/-u port "
                    "specs");
    return o;
}

} // namespace pesto_cmd
