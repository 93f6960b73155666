// SPDX-License-Identifier: Apache-2.0

// A temporary directory removed (with its files) at scope exit.
#pragma once

#include <filesystem>
#include <stdlib.h>
#include <string>

class TempDir {
public:
    TempDir() {
        char tmpl[] = "/tmp/rknp-unit.XXXXXX";
        path_ = ::mkdtemp(tmpl);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    const std::string &path() const { return path_; }

private:
    std::string path_;
};
