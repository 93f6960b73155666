// SPDX-License-Identifier: Apache-2.0

// Fuzz target: rknp::ChildSetup::decode of arbitrary opaque key/values (what
// rknp_child_configure receives from the caller). A decoded setup must be
// valid and survive encode/decode unchanged; only rknp::Error may escape.
//
// Input: NUL-separated strings, taken pairwise as key, value. A key byte
// 0x01..0x0b stands for the n-th known key, so the fuzzer reaches the value
// parsers without having to guess key names.
#include <cstring>
#include <string>

#include "handover/child_setup.hpp"
#include "common/error.hpp"
#include "fuzz_input.hpp"

using namespace rknp;

namespace {

const char *const kKeys[] = {
    "rknp.socket",  "rknp.ifname",     "rknp.mtu",        "rknp.ip",
    "rknp.prefix_len", "rknp.gateway", "rknp.ipv6",       "rknp.offload",
    "rknp.timeout_ms", "rknp.mac",     "rknp.ipv6_address",
    "rknp.parent_token", "rknp.child_token",
};

std::string key_of(std::string k) {
    if (k.size() == 1 && k[0] >= 1 && size_t(k[0]) <= std::size(kKeys))
        return kKeys[k[0] - 1];
    return k;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Input in(data, size);
    KeyValues kv;
    while (in.left() > 0 && kv.size() < 64) {
        std::string k = key_of(in.cstr());
        kv.emplace_back(std::move(k), in.cstr());
    }
    try {
        ChildSetup s = ChildSetup::decode(kv);
        fuzz::require(!s.socket_path.empty() && s.socket_path[0] == '/',
                      "relative socket path accepted");
        fuzz::require(!s.ifname.empty() && s.ifname.size() <= 15,
                      "bad ifname accepted");
        fuzz::require(s.mtu >= kMtuMin && s.mtu <= kMtuMax, "bad mtu accepted");
        fuzz::require(s.prefix_len >= 1 && s.prefix_len <= 32,
                      "bad prefix accepted");
        ChildSetup d = ChildSetup::decode(s.encode());
        fuzz::require(d.socket_path == s.socket_path && d.ifname == s.ifname &&
                          d.mtu == s.mtu && d.ip == s.ip &&
                          d.prefix_len == s.prefix_len &&
                          d.gateway == s.gateway && d.ipv6 == s.ipv6 &&
                          d.offload == s.offload &&
                          d.timeout_ms == s.timeout_ms && d.mac == s.mac &&
                          d.ipv6_address.has_value() ==
                              s.ipv6_address.has_value(),
                      "encode/decode changed the setup");
    } catch (const Error &e) {
        fuzz::require(e.code() == RKNP_ERR_INVALID_ARGUMENT,
                      "decode error with a code other than INVALID_ARGUMENT");
    }
    return 0;
}
