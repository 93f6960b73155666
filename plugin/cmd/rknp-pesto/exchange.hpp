// SPDX-License-Identifier: Apache-2.0

// rknp-pesto's one exchange with rknp-pasta's -c socket: connect, send the
// request, half-close, read the reply to EOF, all against one deadline.
// What the reply means is pesto_protocol's parse_reply.
#pragma once

#include <cstddef>
#include <string>

namespace pesto_cmd {

// rknp-pasta answers within its own deadlines (2 s to read, 2 s to write)
// once it has accepted; the rest is the time to be accepted when its 16
// clients are busy.
constexpr int kExchangeTimeoutMs = 10000;
// A reply is one short line: more is no rknp-pasta's.
constexpr std::size_t kMaxReply = 4096;

// The bytes the server sent before closing (up to kMaxReply). Throws
// cmd::Failure naming the socket and what went wrong.
std::string exchange(const std::string &socket, const std::string &request,
                     int timeout_ms = kExchangeTimeoutMs);

} // namespace pesto_cmd
