// SPDX-License-Identifier: Apache-2.0

// What both ends of the hand-over socket need: its address from a path,
// and a bounded wait for the peer's message.
#pragma once

#include <sys/un.h>

#include <string>

namespace rknp::handover {

// Throws Error(RKNP_ERR_INVALID_ARGUMENT) if path does not fit.
sockaddr_un socket_address(const std::string &path);
// Waits until fd is readable; throws Error(RKNP_ERR_TIMEOUT) naming what
// after timeout_ms.
void wait_readable(int fd, int timeout_ms, const char *what);

} // namespace rknp::handover
