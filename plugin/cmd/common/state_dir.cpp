// SPDX-License-Identifier: Apache-2.0

// A private temporary directory (mode 0700) for rknp's hand-over socket,
// removed with its socket on destruction.
#include "state_dir.hpp"

#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "errors.hpp"

namespace cmd {

namespace {

// The socket path "<base>/<prefix>.XXXXXX/rknp.sock" must fit sockaddr_un.
bool fits(const std::string &base, const std::string &prefix) {
    const size_t tail = prefix.size() + sizeof("/.XXXXXX/rknp.sock");
    return base.size() + tail <= sizeof(sockaddr_un{}.sun_path);
}

} // namespace

StateDir::StateDir(const std::string &prefix) {
    const char *tmp = std::getenv("TMPDIR");
    std::string base = tmp && *tmp == '/' && fits(tmp, prefix) ? tmp : "/tmp";
    std::string templ = base + "/" + prefix + ".XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr)
        throw sys_failure("mkdtemp " + templ);
    path_ = buf.data();
}

StateDir::~StateDir() {
    // rknp_parent_close removed the socket already unless it could not
    // reach it; with --enable-sandbox the child removed the dir.
    ::unlink((path_ + "/rknp.sock").c_str());
    ::rmdir(path_.c_str());
}

} // namespace cmd
