// SPDX-License-Identifier: Apache-2.0

// Reading the host's nameserver from resolv.conf (see resolv_conf.hpp).
#include "common/resolv_conf.hpp"

#include <arpa/inet.h>

#include <fstream>
#include <sstream>
#include <string>

namespace rknp {

std::optional<uint32_t> first_nameserver4(std::string_view text) {
    std::istringstream in{std::string(text)};
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream words(line);
        std::string key, value;
        if (!(words >> key >> value) || key != "nameserver") continue;
        in_addr a{};
        if (inet_pton(AF_INET, value.c_str(), &a) == 1) return ntohl(a.s_addr);
    }
    return std::nullopt;
}

std::optional<uint32_t> host_nameserver4(const char *path) {
    std::ifstream f(path);
    if (!f) return std::nullopt;
    std::ostringstream text;
    text << f.rdbuf();
    return first_nameserver4(text.str());
}

} // namespace rknp
