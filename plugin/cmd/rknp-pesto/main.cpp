// SPDX-License-Identifier: Apache-2.0

// rknp-pesto: pesto's command line for rknp-pasta's -c socket, as Podman 6
// (rootless_port_forwarder="pasta") and rootlesskit's pesto port driver
// run it: the port specs go to rknp-pasta as one request in rknp's pesto
// protocol; exit 0 once rknp-pasta applied them, 1 with its message (or
// why there was none) otherwise.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>

#include "cli.hpp"
#include "cmd/common/errors.hpp"
#include "cmd/common/pesto_protocol.hpp"
#include "exchange.hpp"

namespace {

int run(int argc, char *argv[]) {
    pesto_cmd::Options o = pesto_cmd::parse_args(argc, argv);
    std::string request;
    try {
        request = cmd::pesto::format_request(o.changes);
    } catch (const std::invalid_argument &e) {
        throw cmd::Failure(e.what());
    }
    if (o.debug) std::fprintf(stderr, "%s: request:\n%s", program_invocation_short_name,
                              request.c_str());
    std::string bytes = pesto_cmd::exchange(o.socket, request);
    cmd::pesto::Reply reply = cmd::pesto::parse_reply(bytes);
    if (o.debug)
        std::fprintf(stderr, "%s: reply: %s\n", program_invocation_short_name,
                     reply.ok ? "ok" : reply.message.c_str());
    if (!reply.ok) throw cmd::Failure(o.socket + ": " + reply.message);
    return EXIT_SUCCESS;
}

} // namespace

int main(int argc, char *argv[]) {
    try {
        return run(argc, argv);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, e.what());
        return EXIT_FAILURE;
    }
}
