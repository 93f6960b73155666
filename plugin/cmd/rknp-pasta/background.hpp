// SPDX-License-Identifier: Apache-2.0

// The foreground/background split pasta's callers rely on: the command
// returns (exit 0) only once the namespace's interface is up, the process
// that serves it goes on in the background, and the caller's stdout and
// stderr are closed by then (Podman and rootlesskit read both to EOF).
#pragma once

#include <string>

#include "cmd/common/unique_fd.hpp"

namespace pasta {

class Background {
public:
    // Unless foreground: forks while single-threaded. The caller's process
    // waits for the background's report and exits with it (0 once it is
    // ready, else the background's exit status; its messages reach the
    // caller's stderr meanwhile); only the background returns, in a new
    // session. With foreground, nothing is forked.
    static Background start(bool foreground);

    // Ready: stdin and stdout go to /dev/null, stderr to log_fd if valid
    // (else /dev/null, unless foreground), then the caller's process exits
    // 0. Throws cmd::Failure.
    void ready(int log_fd);

private:
    Background(cmd::UniqueFd report, cmd::UniqueFd null, bool foreground)
        : report_(std::move(report)), null_(std::move(null)),
          foreground_(foreground) {}
    cmd::UniqueFd report_;
    cmd::UniqueFd null_; // /dev/null
    bool foreground_;
};

} // namespace pasta
