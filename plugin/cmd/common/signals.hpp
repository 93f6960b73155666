// SPDX-License-Identifier: Apache-2.0

// How the commands take their stop signals: SIGTERM, SIGINT and SIGHUP
// blocked and read from a signalfd in the main loop, SIGPIPE ignored.
#pragma once

#include "unique_fd.hpp"

namespace cmd {

// Blocks the three on the calling thread (call before any thread exists:
// every later thread inherits the mask) and returns a non-blocking
// signalfd for them; ignores SIGPIPE. Throws Failure.
UniqueFd block_signals();

// The signal a readable signalfd holds, or 0.
int read_signal(int sigfd);

} // namespace cmd
