// SPDX-License-Identifier: Apache-2.0

// Reading the host's nameserver from resolv.conf (see resolv_conf.hpp).
#include "common/resolv_conf.hpp"

#include <arpa/inet.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "common/addr.hpp"

namespace rknp {

namespace {

// Calls take(value) with each "nameserver" line's value in order, until it
// returns true (comments and other lines skipped).
template <class Take> void each_nameserver(std::string_view text, Take take) {
    std::istringstream in{std::string(text)};
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream words(line);
        std::string key, value;
        if (!(words >> key >> value) || key != "nameserver") continue;
        if (take(value)) return;
    }
}

std::optional<std::string> read_text(const char *path) {
    std::ifstream f(path);
    if (!f) return std::nullopt;
    std::ostringstream text;
    text << f.rdbuf();
    return text.str();
}

} // namespace

std::optional<uint32_t> first_nameserver4(std::string_view text) {
    std::optional<uint32_t> found;
    each_nameserver(text, [&](const std::string &value) {
        in_addr a{};
        if (inet_pton(AF_INET, value.c_str(), &a) == 1) found = ntohl(a.s_addr);
        return found.has_value();
    });
    return found;
}

std::optional<uint32_t> host_nameserver4(const char *path) {
    const std::optional<std::string> text = read_text(path);
    return text ? first_nameserver4(*text) : std::nullopt;
}

std::optional<in6_addr> first_nameserver6(std::string_view text) {
    std::optional<in6_addr> found;
    each_nameserver(text, [&](const std::string &value) {
        in6_addr a{};
        // A link-local one names no interface here.
        if (inet_pton(AF_INET6, value.c_str(), &a) == 1 && !IN6_IS_ADDR_UNSPECIFIED(&a) &&
            !IN6_IS_ADDR_MULTICAST(&a) && !is_link_local6(a))
            found = a;
        return found.has_value();
    });
    if (found) return found;
    const std::optional<uint32_t> v4 = first_nameserver4(text);
    if (!v4) return std::nullopt;
    in6_addr m{};
    m.s6_addr[10] = m.s6_addr[11] = 0xff;
    const uint32_t n = htonl(*v4);
    std::memcpy(m.s6_addr + 12, &n, 4);
    return m;
}

std::optional<in6_addr> host_nameserver6(const char *path) {
    const std::optional<std::string> text = read_text(path);
    return text ? first_nameserver6(*text) : std::nullopt;
}

} // namespace rknp
