// SPDX-License-Identifier: Apache-2.0

// The stack thread's confinement (docs/security.md, "The stack thread's
// sandbox"): a seccomp allowlist and a Landlock ruleset, both on the
// calling thread only, installed once the stack holds everything it opens
// at start.
#pragma once

#include <cstdint>
#include <string>

#include "common/log.hpp"

namespace rknp {

// Confines the calling thread for good (threads it creates inherit it;
// the stack creates none): no file access but reading the directories
// /etc/resolv.conf lives in (libslirp re-reads it when it changes), no
// exec, no new processes, no signals to others, no sockets but TCP/UDP
// over IPv4/IPv6, a fixed set of system calls (others fail with EPERM).
// Returns the RKNP_SANDBOX_* bits in force; what the kernel lacks is left
// out and said at info level, failures at warning level. Never throws.
uint32_t confine_stack_thread(const Logger &log) noexcept;

// Each part on its own, for tests: return whether it is in force, or throw
// Error with the reason.
void install_landlock();
void install_seccomp();

} // namespace rknp
