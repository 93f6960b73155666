// SPDX-License-Identifier: Apache-2.0

// The version lines every command prints (see version.hpp).
#include "version.hpp"

#include <seccomp.h>

#include <cstdio>
#include <string>

#include "rknp.h"

namespace cmd {

namespace {

// "1.4.0 (libslirp 4.7.0)" -> "4.7.0"; "" when the format differs.
std::string libslirp_version(const std::string &lib) {
    const std::string tag = "(libslirp ";
    auto at = lib.find(tag);
    if (at == std::string::npos) return "";
    auto end = lib.find(')', at);
    return lib.substr(at + tag.size(), end == std::string::npos
                                           ? std::string::npos
                                           : end - at - tag.size());
}

} // namespace

const char *rknp_version() {
    static const std::string v = [] {
        std::string lib = rknp_library_version();
        return lib.substr(0, lib.find(' '));
    }();
    return v.c_str();
}

void print_library_versions() {
    const std::string lib = rknp_library_version();
    uint32_t abi = rknp_abi_version();
    std::printf("rknp: %s\n", lib.c_str());
    std::printf("rknp ABI: %u.%u\n", abi >> 16, abi & 0xffff);
    std::string slirp = libslirp_version(lib);
    if (!slirp.empty()) std::printf("libslirp: %s\n", slirp.c_str());
    if (const scmp_version *v = seccomp_version())
        std::printf("libseccomp: %u.%u.%u\n", v->major, v->minor, v->micro);
}

} // namespace cmd
