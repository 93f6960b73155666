// The C ABI: argument checks, exception-to-error conversion, the function
// table. No C++ exception or type leaves this file.
#include <slirp/libslirp.h>

#include <cstring>
#include <new>
#include <string>

#include "child.hpp"
#include "config.hpp"
#include "error.hpp"
#include "parent.hpp"
#include "rknp.h"

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

rknp_status fail(rknp_error **err, rknp_status code, const std::string &msg) {
    if (err != nullptr) *err = new (std::nothrow) rknp_error{code, msg};
    return code;
}

// Runs f, mapping every exception to a status and an rknp_error.
template <typename F> rknp_status guarded(rknp_error **err, F &&f) noexcept {
    if (err != nullptr) *err = nullptr;
    try {
        f();
        return RKNP_OK;
    } catch (const rknp::Error &e) {
        return fail(err, e.code(), e.what());
    } catch (const std::bad_alloc &) {
        return fail(err, RKNP_ERR_SYSTEM, "out of memory");
    } catch (const std::exception &e) {
        return fail(err, RKNP_ERR_INTERNAL, std::string("internal: ") + e.what());
    } catch (...) {
        return fail(err, RKNP_ERR_INTERNAL, "internal: unknown exception");
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

// Output structs must be at least as large as this library's version.
void require_size(uint32_t struct_size, size_t size, const char *name) {
    if (struct_size < size)
        rknp::throw_invalid(std::string(name) + ".struct_size " +
                            std::to_string(struct_size) + " is too small");
}

} // namespace

extern "C" {

RKNP_API rknp_status rknp_error_code(const rknp_error *err) {
    return err != nullptr ? err->code : RKNP_ERR_INVALID_ARGUMENT;
}

RKNP_API const char *rknp_error_message(const rknp_error *err) {
    return err != nullptr ? err->message.c_str() : "";
}

RKNP_API void rknp_error_free(rknp_error *err) { delete err; }

RKNP_API uint32_t rknp_abi_version(void) { return RKNP_ABI_VERSION; }

RKNP_API const char *rknp_library_version(void) {
    static const std::string v =
        std::string(RKNP_VERSION) + " (libslirp " + slirp_version_string() + ")";
    return v.c_str();
}

RKNP_API rknp_status rknp_config_init(rknp_config *cfg, uint32_t struct_size) {
    if (cfg == nullptr || struct_size < rknp::kConfigV1Size)
        return RKNP_ERR_INVALID_ARGUMENT;
    rknp::default_config(*cfg);
    cfg->struct_size = struct_size < sizeof *cfg ? struct_size : sizeof *cfg;
    return RKNP_OK;
}

RKNP_API rknp_status rknp_parent_new(const rknp_config *cfg, rknp_parent **out,
                                     rknp_error **err) {
    return guarded(err, [&] {
        require(cfg != nullptr, "config");
        require(out != nullptr, "out");
        *out = nullptr;
        *out = new rknp_parent(rknp::ParentConfig::from_c(*cfg));
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
        require_size(out->struct_size, sizeof *out, "rknp_network");
        const auto &c = p->impl.config();
        uint32_t size = out->struct_size;
        std::memset(out, 0, sizeof *out);
        out->struct_size = size;
        out->mtu = c.mtu;
        put(out->ifname, c.ifname);
        put(out->ip, rknp::format_ipv4(c.cidr.guest()));
        out->prefix_len = c.cidr.prefix_len;
        put(out->gateway, rknp::format_ipv4(c.cidr.gateway()));
        if (!c.disable_dns) {
            put(out->dns[out->dns_count++], rknp::format_ipv4(c.cidr.dns()));
            if (c.ipv6) put(out->dns[out->dns_count++], rknp::kIpv6Dns);
        }
        if (c.ipv6) put(out->ipv6_gateway, rknp::kIpv6Gateway);
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
        require_size(out->struct_size, sizeof *out, "rknp_stats");
        const auto &s = p->impl.stats();
        out->tap_attached = s.tap_attached.load() ? 1 : 0;
        out->frames_from_tap = s.frames_from_tap.load();
        out->bytes_from_tap = s.bytes_from_tap.load();
        out->frames_to_tap = s.frames_to_tap.load();
        out->bytes_to_tap = s.bytes_to_tap.load();
        out->frames_dropped = s.frames_dropped.load();
        out->handovers_refused = s.handovers_refused.load();
    });
}

RKNP_API void rknp_parent_close(rknp_parent *p) {
    if (p != nullptr) p->impl.close();
}

RKNP_API void rknp_parent_free(rknp_parent *p) { delete p; }

RKNP_API rknp_status rknp_child_options_init(rknp_child_options *opts,
                                             uint32_t struct_size) {
    if (opts == nullptr || struct_size < sizeof *opts)
        return RKNP_ERR_INVALID_ARGUMENT;
    std::memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    return RKNP_OK;
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
        if (opts != nullptr) {
            if (opts->struct_size < sizeof *opts)
                rknp::throw_invalid("rknp_child_options.struct_size " +
                                    std::to_string(opts->struct_size) +
                                    ": call rknp_child_options_init first");
            if (opts->detached_netns_path != nullptr)
                netns = opts->detached_netns_path;
            log = rknp::Logger(opts->log_fn, opts->log_user_data);
        }
        if (devname != nullptr && devname_len < 16)
            rknp::throw_invalid("devname_len " + std::to_string(devname_len) +
                                " is too small: pass at least 16");
        auto setup = rknp::ChildSetup::decode(kv);
        std::string dev = rknp::configure_child(setup, netns, log);
        if (devname != nullptr) std::memcpy(devname, dev.c_str(), dev.size() + 1);
    });
}

RKNP_API rknp_status rknp_forward_init(rknp_forward *fwd, uint32_t struct_size) {
    if (fwd == nullptr || struct_size < sizeof *fwd)
        return RKNP_ERR_INVALID_ARGUMENT;
    std::memset(fwd, 0, sizeof *fwd);
    fwd->struct_size = sizeof *fwd;
    fwd->protocol = RKNP_PROTO_TCP;
    return RKNP_OK;
}

RKNP_API rknp_status rknp_parent_add_forward(rknp_parent *p,
                                             const rknp_forward *fwd,
                                             uint32_t *id_out,
                                             rknp_error **err) {
    return guarded(err, [&] {
        require(p != nullptr, "parent");
        require(fwd != nullptr, "forward");
        require(id_out != nullptr, "id_out");
        *id_out = p->impl.add_forward(*fwd);
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
        auto all = p->impl.forwards();
        *count = uint32_t(all.size());
        uint32_t i = 0;
        for (const auto &[id, f] : all) {
            if (i == capacity) break;
            rknp_forward_info &o = out[i++];
            require_size(o.struct_size, sizeof o, "rknp_forward_info");
            o.id = id;
            o.protocol = f.udp ? RKNP_PROTO_UDP : RKNP_PROTO_TCP;
            o.host_port = f.host_port;
            o.guest_port = f.guest_port;
            put(o.host_addr, f.host_string());
            put(o.guest_addr, rknp::format_ipv4(f.guest));
        }
    });
}

static const rknp_api_v1 kApiV1 = {
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
    rknp_forward_init,
    rknp_parent_add_forward,
    rknp_parent_remove_forward,
    rknp_parent_list_forwards,
};

RKNP_API const void *rknp_get_api(uint32_t abi_major) {
    return abi_major == 1 ? &kApiV1 : nullptr;
}

} // extern "C"
