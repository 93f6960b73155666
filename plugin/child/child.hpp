// SPDX-License-Identifier: Apache-2.0

// The child side: create and configure the tap, hand it to the parent.
#pragma once

#include <string>

#include "handover/child_setup.hpp"
#include "common/log.hpp"

namespace rknp {

// Runs in the calling thread's network namespace, or, when
// detached_netns_path is non-empty, on a private thread that enters it.
// link_only: addresses and routes are left to the caller. Returns the
// device name. Throws Error.
std::string configure_child(const ChildSetup &setup,
                            const std::string &detached_netns_path,
                            const Logger &log, bool link_only);

} // namespace rknp
