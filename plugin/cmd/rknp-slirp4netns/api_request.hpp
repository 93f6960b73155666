// SPDX-License-Identifier: Apache-2.0

// The API's request framing: when the bytes a client has sent so far are a
// request to answer. slirp4netns answers what one read(2) returned; rknp
// reads until the first JSON value is complete, and answers at once when
// the bytes can never become one (a parse error no later byte can fix), so
// a client that never half-closes gets its "cannot parse JSON" without
// waiting for the deadline.
#pragma once

#include <string_view>

#include "cmd/common/control_protocol.hpp"

namespace s4n {

// Incomplete: a prefix of some valid JSON text; Complete: the first value
// is whole; Invalid: no continuation parses ("cannot parse JSON" now).
using cmd::RequestState;

// The request as parson sees it (slirp4netns hands it a C string): the
// bytes up to the first NUL.
std::string_view request_text(std::string_view bytes);

// What a buffer of request bytes is. A NUL ends the text (later bytes
// cannot change it), so a buffer holding one is never Incomplete.
RequestState request_state(std::string_view bytes);

} // namespace s4n
