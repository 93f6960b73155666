// SPDX-License-Identifier: Apache-2.0

// Error type of rknp's commands: a message for stderr plus the exit code
// the program they stand in for would use, and a helper that builds one
// from errno.
#pragma once

#include <cerrno>
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

} // namespace cmd
