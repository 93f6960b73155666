// SPDX-License-Identifier: Apache-2.0

// --enable-seccomp: a libseccomp filter that kills the process on every
// system call slirp4netns 1.2 blocks plus more (namespace creation, io_uring,
// bpf, keyrings, ...) and on any foreign-architecture system call.
#pragma once

namespace cmd {

// Loads the filter on every thread of the process (TSYNC); threads created
// later inherit it, so load it before rknp_parent_start. announce: print the list of
// blocked calls on stdout, as slirp4netns does. Throws Failure.
void enable_seccomp(bool announce = true);

} // namespace cmd
