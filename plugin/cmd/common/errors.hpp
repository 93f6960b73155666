// SPDX-License-Identifier: Apache-2.0

// Error type of rknp's commands: a message for stderr plus the exit code
// the program they stand in for would use, a helper that builds one from
// errno, and the usage errors of pasta's and pesto's command lines.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace cmd {

class Failure : public std::runtime_error {
public:
    explicit Failure(const std::string &msg, int exit_code = 1)
        : std::runtime_error(msg), exit_code_(exit_code) {}
    int exit_code() const { return exit_code_; }

private:
    int exit_code_;
};

// "what: strerror(errno)", like perror(what).
inline Failure sys_failure(const std::string &what, int err = errno) {
    return Failure(what + ": " + std::strerror(err));
}

// A usage error, as pasta and pesto report one: "PROGRAM: msg" on stderr,
// exit 1, before anything has run.
[[noreturn]] inline void usage_error(const std::string &msg) {
    std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, msg.c_str());
    std::exit(EXIT_FAILURE);
}

} // namespace cmd
