// SPDX-License-Identifier: Apache-2.0

// --enable-sandbox: a private mount namespace whose root is an empty,
// read-only tmpfs holding only read-only binds of /etc and /run (for
// resolv.conf) and a writable bind of rknp's state dir; then no new
// privileges and every capability but CAP_NET_BIND_SERVICE dropped.
#pragma once

#include <string>

namespace cmd {

// Needs CAP_SYS_ADMIN in the caller's user namespace (enter_user_as_root
// first when not root) and a single-threaded process. state_dir stays
// reachable at the same path. drop_caps false leaves the last step,
// drop_capabilities(), to the caller: a thread started in between (it
// shares the new root) may still enter a namespace, and then drops its
// own (capabilities are a thread's). Throws Failure.
void create_sandbox(const std::string &state_dir, bool drop_caps = true);

// No new privileges and every capability but CAP_NET_BIND_SERVICE
// dropped, for the calling thread (and the threads it starts later).
// Throws Failure.
void drop_capabilities();

} // namespace cmd
