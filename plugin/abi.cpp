// SPDX-License-Identifier: Apache-2.0

// The C ABI: argument checks, exception-to-error conversion, the function
// table. No C++ exception or type leaves this file.
#include <slirp/libslirp.h>

#include <cstring>
#include <new>
#include <string>

#include "child/child.hpp"
#include "common/config.hpp"
#include "common/error.hpp"
#include "parent/parent.hpp"
#include "rknp.h"
#include "struct_versions.hpp"

struct rknp_error {
    rknp_status code;
    std::string message;
};

struct rknp_parent {
    explicit rknp_parent(rknp::ParentConfig cfg) : impl(std::move(cfg)) {}
    rknp::Parent impl;
};

namespace {

#ifndef RKNP_VERSION
#define RKNP_VERSION "0.0.0"
#endif

// The error handed out when not even an rknp_error can be allocated (a
// process at its RLIMIT_AS or RLIMIT_DATA): the caller still learns why,
// not an empty message. Never written; rknp_error_free leaves it alone.
const rknp_error kOutOfMemory{RKNP_ERR_SYSTEM,
                              "out of memory (no room for the error's own message)"};

rknp_status fail(rknp_error **err, rknp_status code, const std::string &msg) {
    if (err == nullptr) return code;
    try {
        *err = new rknp_error{code, msg};
    } catch (const std::bad_alloc &) {
        *err = const_cast<rknp_error *>(&kOutOfMemory);
    }
    return code;
}

// Runs f, mapping every exception to a status and an rknp_error.
template <typename F> rknp_status guarded(rknp_error **err, F &&f) noexcept {
    if (err != nullptr) *err = nullptr;
    try {
        f();
        return RKNP_OK;
    } catch (...) {
        rknp::ErrorRecord e = rknp::current_error();
        return fail(err, e.code, e.message);
    }
}

void require(bool ok, const char *what) {
    if (!ok) rknp::throw_invalid(std::string(what) + " is NULL");
}

// Copies a NUL-terminated string into a fixed field; throws if it won't fit.
template <size_t N> void put(char (&dst)[N], const std::string &s) {
    if (s.size() >= N) throw rknp::Error(RKNP_ERR_INTERNAL, "field overflow");
    std::memcpy(dst, s.c_str(), s.size() + 1);
}

rknp_forward default_forward() {
    rknp_forward f{};
    f.struct_size = sizeof f;
    f.protocol = RKNP_PROTO_TCP;
    return f;
}

rknp_child_options default_child_options() {
    rknp_child_options o{};
    o.struct_size = sizeof o;
    return o;
}

} // namespace

extern "C" {

RKNP_API rknp_status rknp_error_code(const rknp_error *err) {
    return err != nullptr ? err->code : RKNP_ERR_INVALID_ARGUMENT;
}

RKNP_API const char *rknp_error_message(const rknp_error *err) {
    return err != nullptr ? err->message.c_str() : "";
}

RKNP_API void rknp_error_free(rknp_error *err) {
    if (err != &kOutOfMemory) delete err;
}

RKNP_API uint32_t rknp_abi_version(void) { return RKNP_ABI_VERSION; }

RKNP_API const char *rknp_library_version(void) {
    static const std::string v =
        std::string(RKNP_VERSION) + " (libslirp " + slirp_version_string() + ")";
    return v.c_str();
}

RKNP_API rknp_status rknp_config_init(rknp_config *cfg, uint32_t struct_size) {
    return rknp::init_versioned(cfg, struct_size, rknp::default_config());
}

RKNP_API rknp_status rknp_parent_new(const rknp_config *cfg, rknp_parent **out,
                                     rknp_error **err) {
    return guarded(err, [&] {
        require(cfg != nullptr, "config");
        require(out != nullptr, "out");
        *out = nullptr;
        rknp_config c = rknp::read_versioned(*cfg, rknp::default_config());
        *out = new rknp_parent(rknp::ParentConfig::from_c(c));
    });
}

RKNP_API rknp_status rknp_parent_start(rknp_parent *p, const char *state_dir,
                                       int32_t child_pid, rknp_error **err) {
    return guarded(err, [&] {
        require(p != nullptr, "parent");
        require(state_dir != nullptr, "state_dir");
        p->impl.start(state_dir, child_pid);
    });
}

RKNP_API rknp_status rknp_parent_network(const rknp_parent *p,
                                         rknp_network *out, rknp_error **err) {
    return guarded(err, [&] {
        require(p != nullptr, "parent");
        require(out != nullptr, "network");
        const auto &c = p->impl.config();
        rknp_network n{};
        n.mtu = c.mtu;
        put(n.ifname, c.ifname);
        put(n.ip, rknp::format_ipv4(c.cidr.guest()));
        n.prefix_len = c.cidr.prefix_len;
        put(n.gateway, rknp::format_ipv4(c.cidr.gateway()));
        if (!c.disable_dns) {
            put(n.dns[n.dns_count++], rknp::format_ipv4(c.cidr.dns()));
            // pasta's IPv6 model has no IPv6 DNS forwarder (libslirp's
            // fd00::3 is off with the rest of its IPv6).
            if (c.ipv6 && !c.ipv6_host) put(n.dns[n.dns_count++], rknp::kIpv6Dns);
        }
        if (c.ipv6_host)
            put(n.ipv6_gateway, rknp::format_ipv6(c.ipv6_host->gateway));
        else if (c.ipv6)
            put(n.ipv6_gateway, rknp::kIpv6Gateway);
        put(n.libslirp_version, slirp_version_string());
        rknp::write_versioned(out, n);
    });
}

RKNP_API uint32_t rknp_parent_opaque_count(const rknp_parent *p) {
    if (p == nullptr || !p->impl.started()) return 0;
    return uint32_t(p->impl.opaque().size());
}

RKNP_API rknp_status rknp_parent_opaque_get(const rknp_parent *p,
                                            uint32_t index, const char **key,
                                            const char **value,
                                            rknp_error **err) {
    return guarded(err, [&] {
        require(p != nullptr, "parent");
        require(key != nullptr && value != nullptr, "key or value");
        if (index >= rknp_parent_opaque_count(p))
            rknp::throw_invalid("opaque index " + std::to_string(index) +
                                " out of range");
        const auto &kv = p->impl.opaque()[index];
        *key = kv.first.c_str();
        *value = kv.second.c_str();
    });
}

RKNP_API rknp_status rknp_parent_stats(const rknp_parent *p, rknp_stats *out,
                                       rknp_error **err) {
    return guarded(err, [&] {
        require(p != nullptr, "parent");
        require(out != nullptr, "stats");
        const auto &s = p->impl.stats();
        rknp_stats o{};
        o.tap_attached = s.tap_attached.load() ? 1 : 0;
        o.frames_from_tap = s.frames_from_tap.load();
        o.bytes_from_tap = s.bytes_from_tap.load();
        o.frames_to_tap = s.frames_to_tap.load();
        o.bytes_to_tap = s.bytes_to_tap.load();
        o.frames_dropped = s.frames_dropped.load();
        o.handovers_refused = s.handovers_refused.load();
        o.segments_merged = s.segments_merged.load();
        o.acks_superseded = s.acks_superseded.load();
        o.frames_truncated = s.frames_truncated.load();
        o.frames_filtered = s.frames_filtered.load();
        o.flows_refused = s.flows_refused.load();
        o.flows_rate_limited = s.flows_rate_limited.load();
        o.host_sockets = s.host_sockets.load();
        o.tcp_fast_flows = s.tcp_fast_flows.load();
        o.tcp_fast_retransmits = s.tcp_fast_retransmits.load();
        o.sandbox = s.sandbox.load();
        o.tcp_peek_mode = s.tcp_peek_mode.load();
        o.udp_fast_flows = s.udp_fast_flows.load();
        o.udp_fast_dropped = s.udp_fast_dropped.load();
        o.tcp_forward_accepted = s.tcp_forward_accepted.load();
        o.tcp_forward_refused = s.tcp_forward_refused.load();
        o.tcp_forward_full = s.tcp_forward_full.load();
        o.tcp_forward_rate_limited = s.tcp_forward_rate_limited.load();
        o.tcp_forward_flows = s.tcp_forward_flows.load();
        o.udp_forward_clients = s.udp_forward_clients.load();
        o.udp_forward_admitted = s.udp_forward_admitted.load();
        o.udp_forward_rate_limited = s.udp_forward_rate_limited.load();
        o.udp_forward_evicted = s.udp_forward_evicted.load();
        o.udp_forward_full = s.udp_forward_full.load();
        rknp::write_versioned(out, o);
    });
}

RKNP_API void rknp_parent_close(rknp_parent *p) {
    if (p != nullptr) p->impl.close();
}

RKNP_API void rknp_parent_free(rknp_parent *p) {
    if (p == nullptr) return;
    // From inside a log callback the handle is still in use on this very
    // thread (the call that logged, or the logger thread it would have to
    // join): freeing it would end in std::terminate or a use after free.
    // Refused instead; rknp.h says so.
    if (rknp::Parent::in_log_callback()) {
        p->impl.refuse_free();
        return;
    }
    delete p;
}

RKNP_API rknp_status rknp_child_options_init(rknp_child_options *opts,
                                             uint32_t struct_size) {
    return rknp::init_versioned(opts, struct_size, default_child_options());
}

RKNP_API rknp_status rknp_child_configure(const rknp_kv *opaque,
                                          uint32_t opaque_count,
                                          const rknp_child_options *opts,
                                          char *devname, uint32_t devname_len,
                                          rknp_error **err) {
    return guarded(err, [&] {
        require(opaque != nullptr || opaque_count == 0, "opaque");
        rknp::KeyValues kv;
        for (uint32_t i = 0; i < opaque_count; ++i) {
            require(opaque[i].key != nullptr && opaque[i].value != nullptr,
                    "opaque key or value");
            kv.emplace_back(opaque[i].key, opaque[i].value);
        }
        std::string netns;
        rknp::Logger log;
        bool link_only = false;
        if (opts != nullptr) {
            rknp_child_options o =
                rknp::read_versioned(*opts, default_child_options());
            if (o.detached_netns_path != nullptr)
                netns = o.detached_netns_path;
            log = rknp::Logger(o.log_fn, o.log_user_data);
            if (o.link_only > 1)
                rknp::throw_invalid("invalid rknp_child_options.link_only \"" +
                                    std::to_string(o.link_only) +
                                    "\": must be 0 or 1");
            link_only = o.link_only;
        }
        if (devname != nullptr && devname_len < 16)
            rknp::throw_invalid("devname_len " + std::to_string(devname_len) +
                                " is too small: pass at least 16");
        auto setup = rknp::ChildSetup::decode(kv);
        std::string dev = rknp::configure_child(setup, netns, log, link_only);
        if (devname != nullptr) std::memcpy(devname, dev.c_str(), dev.size() + 1);
    });
}

RKNP_API rknp_status rknp_forward_init(rknp_forward *fwd, uint32_t struct_size) {
    return rknp::init_versioned(fwd, struct_size, default_forward());
}

RKNP_API rknp_status rknp_parent_add_forward(rknp_parent *p,
                                             const rknp_forward *fwd,
                                             uint32_t *id_out,
                                             rknp_error **err) {
    return guarded(err, [&] {
        require(p != nullptr, "parent");
        require(fwd != nullptr, "forward");
        require(id_out != nullptr, "id_out");
        *id_out = p->impl.add_forward(
            rknp::read_versioned(*fwd, default_forward()));
    });
}

RKNP_API rknp_status rknp_parent_remove_forward(rknp_parent *p, uint32_t id,
                                                rknp_error **err) {
    return guarded(err, [&] {
        require(p != nullptr, "parent");
        p->impl.remove_forward(id);
    });
}

RKNP_API rknp_status rknp_parent_list_forwards(const rknp_parent *p,
                                               rknp_forward_info *out,
                                               uint32_t capacity,
                                               uint32_t *count,
                                               rknp_error **err) {
    return guarded(err, [&] {
        require(p != nullptr, "parent");
        require(count != nullptr, "count");
        require(out != nullptr || capacity == 0, "out");
        // The caller's elements may be larger or smaller than ours: step
        // through the array by the caller's struct_size.
        uint32_t stride = capacity > 0 ? rknp::struct_size_of(out) : 0;
        if (capacity > 0) rknp::field_bytes<rknp_forward_info>(stride);
        auto *base = reinterpret_cast<unsigned char *>(out);
        for (uint32_t i = 1; i < capacity; ++i)
            if (rknp::struct_size_of(base + size_t(i) * stride) != stride)
                rknp::throw_invalid("rknp_forward_info[" + std::to_string(i) +
                                    "].struct_size differs from element 0's");
        auto all = p->impl.forwards();
        *count = uint32_t(all.size());
        uint32_t i = 0;
        for (const auto &[id, f] : all) {
            if (i == capacity) break;
            rknp_forward_info o{};
            o.id = id;
            o.protocol = f.udp ? RKNP_PROTO_UDP : RKNP_PROTO_TCP;
            o.host_port = f.host_port;
            o.guest_port = f.guest_port;
            put(o.host_addr, f.host_string());
            // guest_addr (1.1) is too short for IPv6: "" there, the
            // address in guest_addr_full (1.7) for callers that have it.
            if (!f.guest_v6) put(o.guest_addr, f.guest_string());
            put(o.guest_addr_full, f.guest_string());
            rknp::write_versioned(base + size_t(i++) * stride, o);
        }
    });
}

static const rknp_api_v1 kApiV1 = {
    // 1.0
    sizeof(rknp_api_v1),
    RKNP_ABI_MAJOR,
    RKNP_ABI_MINOR,
    0,
    rknp_error_code,
    rknp_error_message,
    rknp_error_free,
    rknp_abi_version,
    rknp_library_version,
    rknp_config_init,
    rknp_parent_new,
    rknp_parent_start,
    rknp_parent_network,
    rknp_parent_opaque_count,
    rknp_parent_opaque_get,
    rknp_parent_stats,
    rknp_parent_close,
    rknp_parent_free,
    rknp_child_options_init,
    rknp_child_configure,
    // 1.1
    rknp_forward_init,
    rknp_parent_add_forward,
    rknp_parent_remove_forward,
    rknp_parent_list_forwards,
};

RKNP_API const void *rknp_get_api(uint32_t abi_major) {
    return abi_major == 1 ? &kApiV1 : nullptr;
}

} // extern "C"
