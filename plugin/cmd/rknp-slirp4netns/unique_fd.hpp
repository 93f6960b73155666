// SPDX-License-Identifier: Apache-2.0

// The core's header-only RAII fd owner, used here as s4n::UniqueFd (the
// command links only the public ABI; this header has no library code).
#pragma once

#include "common/fd.hpp"

namespace s4n {
using rknp::UniqueFd;
} // namespace s4n
