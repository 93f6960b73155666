// SPDX-License-Identifier: Apache-2.0

// rknp's pesto protocol: what rknp-pesto sends to rknp-pasta's -c socket
// and what comes back. pasta's own wire format is pasta's; rknp ships both
// ends (Podman and rootlesskit run the pesto found beside pasta), so it
// speaks this small text protocol, versioned so that a mismatched pair
// fails with a message saying so. One request per connection:
//
//   rknp-pesto 1\n               header: magic and version
//   add tcp 0.0.0.0/8080\n       OP PROTO SPEC: OP add|delete, PROTO
//   delete udp [::]/53:5353\n    tcp|udp, SPEC a pasta -t/-u port spec
//   end\n                        (at most kMaxChanges lines)
//
// and one reply line, which the server sends before closing:
//
//   rknp-pesto 1 ok\n
//   rknp-pesto 1 error MESSAGE\n
//
// Only printable ASCII and \n; at most kMaxRequest bytes. The changes are
// applied in order, all or none. A server that does not speak the
// client's version answers with an error in its own version, so each side
// can name both. Pure: no system calls, so unit tests cover the framing.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "control_protocol.hpp"

namespace cmd::pesto {

constexpr unsigned kVersion = 1;
// Podman sends two specs a published port (0.0.0.0 and [::]): 256 changes
// are 128 ports a call, and fit in 16 KiB with an IPv6 address each. The
// server frames a request anew each time bytes arrive (ControlProtocol is
// stateless), so the size bounds that work too.
constexpr std::size_t kMaxRequest = 16384;
// Each spec is parsed over the whole port space: bounded work a request.
constexpr std::size_t kMaxChanges = 256;
constexpr std::size_t kMaxSpec = 256;
// Longer error messages are cut (with "...").
constexpr std::size_t kMaxMessage = 1024;

enum class Op { add, remove };
enum class Proto { tcp, udp };

struct Change {
    Op op;
    Proto proto;
    std::string spec; // a pasta port spec, not yet checked as one
    bool operator==(const Change &) const = default;
};

// "add"/"delete", "tcp"/"udp".
const char *op_name(Op op);
const char *proto_name(Proto proto);

// The request's bytes. Throws std::invalid_argument if a spec cannot be
// sent (empty, longer than kMaxSpec, a byte outside '!'..'~'), there are no
// changes or more than kMaxChanges, or the whole exceeds kMaxRequest.
std::string format_request(const std::vector<Change> &changes);

struct ParsedRequest {
    RequestState state = RequestState::Incomplete;
    std::vector<Change> changes; // Complete
    std::string error;           // Invalid: why, for the reply
};

// What the bytes a client sent so far are: Incomplete while they are a
// prefix of some valid request, Complete with its changes once "end\n"
// ends it, Invalid (with the reason) as soon as no continuation can make
// one (a foreign header, another version, a bad line, bytes after "end").
ParsedRequest parse_request(std::string_view bytes);

// The server's reply lines. error_reply keeps the message printable and on
// one line, cut at kMaxMessage.
std::string ok_reply();
std::string error_reply(std::string_view message);

struct Reply {
    bool ok = false;
    std::string message; // !ok: the server's error or why the reply is none
};

// What the server answered, read to EOF: its ok or error, or an error
// saying what else came (nothing, a foreign socket, another version).
Reply parse_reply(std::string_view bytes);

} // namespace cmd::pesto
