// The child's end of the tap hand-over: send the tap, wait for the verdict.
#pragma once

#include <string>

namespace rknp::handover {

// Child: hands tap_fd over and waits for the parent's verdict.
void send_tap(const std::string &path, int tap_fd, const std::string &ifname,
              int timeout_ms);

} // namespace rknp::handover
