// SPDX-License-Identifier: Apache-2.0

// The core's header-only RAII fd owner, used here as cmd::UniqueFd (the
// command links only the public ABI; this header has no library code).
#pragma once

#include "common/fd.hpp"

namespace cmd {
using rknp::UniqueFd;
} // namespace cmd
