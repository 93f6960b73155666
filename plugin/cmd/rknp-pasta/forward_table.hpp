// SPDX-License-Identifier: Apache-2.0

// The forwards in force on rknp-pasta's parent, whoever made them: the
// command line (-t/-u), an "auto" rescan or the -c socket. rknp-pesto's
// --delete removes any of them and --add finds them there, as pasta's
// pesto does with its one table.
#pragma once

#include <arpa/inet.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace pasta {

// One host address and port forwarded.
struct Forward {
    uint32_t proto;        // RKNP_PROTO_*
    std::string host_addr; // canonical literal (ForwardTable::canonical)
    uint16_t host_port;
    uint16_t guest_port;
    uint32_t id;           // the parent's
    // The address in the namespace it goes to (a spec's target, canonical):
    // "" for the namespace's own.
    std::string target;
};

class ForwardTable {
public:
    using Iter = std::vector<Forward>::iterator;

    // The literal as inet_ntop writes it, so that "0:0::" and "::" name
    // one forward; "" if it is none.
    static std::string canonical(const std::string &addr) {
        unsigned char buf[16];
        char out[INET6_ADDRSTRLEN];
        int family = addr.find(':') == std::string::npos ? AF_INET : AF_INET6;
        if (::inet_pton(family, addr.c_str(), buf) != 1 ||
            !::inet_ntop(family, buf, out, sizeof out))
            return "";
        return out;
    }

    Iter find(uint32_t proto, const std::string &host_addr, uint16_t host_port) {
        return std::find_if(all_.begin(), all_.end(), [&](const Forward &t) {
            return t.proto == proto && t.host_addr == host_addr && t.host_port == host_port;
        });
    }
    Iter end() { return all_.end(); }
    bool has(uint32_t id) const {
        return std::any_of(all_.begin(), all_.end(),
                           [id](const Forward &t) { return t.id == id; });
    }
    // f.host_addr canonical already.
    void add(Forward f) { all_.push_back(std::move(f)); }
    void erase(Iter it) { all_.erase(it); }
    void erase_id(uint32_t id) {
        std::erase_if(all_, [id](const Forward &t) { return t.id == id; });
    }
    std::size_t size() const { return all_.size(); }
    const std::vector<Forward> &all() const { return all_; }

private:
    std::vector<Forward> all_;
};

} // namespace pasta
