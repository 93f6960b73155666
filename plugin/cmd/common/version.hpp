// SPDX-License-Identifier: Apache-2.0

// The version lines every command prints after its own first line: the
// library's version, its ABI, libslirp's and libseccomp's.
#pragma once

namespace cmd {

// "rknp: 1.5.0 (libslirp 4.7.0)", "rknp ABI: 1.5", "libslirp: 4.7.0",
// "libseccomp: 2.5.4" on stdout.
void print_library_versions();

// The library's own version ("1.5.0"), the first word of
// rknp_library_version().
const char *rknp_version();

} // namespace cmd
