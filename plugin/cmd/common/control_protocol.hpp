// SPDX-License-Identifier: Apache-2.0

// What a command's control socket speaks, as ControlClient and
// ControlSocket see it: when the bytes a client has sent are a request to
// answer, and the reply. rknp-slirp4netns's JSON API and rknp-pasta's
// pesto protocol each implement it; the socket's rules (mode, peers,
// deadlines, sizes) are the same for both.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cmd {

enum class RequestState {
    Incomplete, // a prefix of some valid request: wait for more bytes
    Complete,   // a whole request: answer it
    Invalid,    // no continuation can make it valid: answer it now
};

class ControlProtocol {
public:
    virtual ~ControlProtocol() = default;

    // Names the socket's log lines ("api_handler: ...").
    virtual const char *tag() const = 0;
    // The requests' size limit: a client that sends this many bytes
    // without completing a request gets too_large(). Constant.
    virtual std::size_t max_request() const = 0;
    // What the bytes read so far are (fewer than max_request()). Pure.
    virtual RequestState state(std::string_view bytes) const = 0;
    // The reply to what was read: a whole request, a hopeless one, or what
    // came before EOF or the deadline. Throwing costs that client its
    // reply, nobody else anything.
    virtual std::string answer(std::string_view bytes) = 0;
    // The reply to the max_request() bytes read without a whole request
    // among them.
    virtual std::string too_large(std::string_view bytes) = 0;
};

} // namespace cmd
