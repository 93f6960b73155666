// SPDX-License-Identifier: Apache-2.0

// The child's end of the tap hand-over: make sure the socket is the
// parent's, send the tap, wait for the verdict.
#pragma once

#include <string>

#include "handover/messages.hpp"

namespace rknp::handover {

// Child: connects to path, waits for the parent's greeting and checks its
// token (the tap never goes to a peer that cannot prove it is the parent),
// then hands tap_fd over with the child's token and waits for the
// verdict. Every step, connect included, ends within timeout_ms overall
// (Error RKNP_ERR_TIMEOUT).
void send_tap(const std::string &path, int tap_fd, const std::string &ifname,
              const Tokens &tokens, int timeout_ms);

} // namespace rknp::handover
