// SPDX-License-Identifier: Apache-2.0

// A private temporary directory (mode 0700) for rknp's hand-over socket,
// removed with its socket on destruction.
#pragma once

#include <string>

namespace cmd {

class StateDir {
public:
    // $TMPDIR (or /tmp)/PREFIX.XXXXXX; throws Failure.
    explicit StateDir(const std::string &prefix);
    ~StateDir();
    StateDir(const StateDir &) = delete;
    StateDir &operator=(const StateDir &) = delete;
    const std::string &path() const { return path_; }

private:
    std::string path_;
};

} // namespace cmd
