/* SPDX-License-Identifier: Apache-2.0 */
/* Static inline trampolines: cgo cannot call C function pointers directly,
 * so every call through the rknp_api_v1 table goes through one of these.
 * Included by each Go file that calls into the table (cgo preambles are
 * per file). */
#ifndef RKNP_GO_TRAMPOLINES_H
#define RKNP_GO_TRAMPOLINES_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include "rknp.h"

/* The table grows within a major: a function exists when its slot lies
 * inside the struct_size the library reports. */
#define RKNP_GO_HAS(api, field) \
	((api)->struct_size >= offsetof(rknp_api_v1, field) + sizeof((api)->field) && (api)->field != NULL)

/* Size of the ABI 1.0 table: everything these bindings require. */
static inline size_t rknp_go_v1_0_size(void) { return RKNP_API_V1_SIZE_1_0; }

/* Implemented in Go (log_export.go). */
extern void rknpGoLog(uintptr_t handle, int32_t level, char *msg);

/* Adapts rknp_log_fn to the exported Go function; the cgo.Handle travels
 * as the user_data pointer. */
static inline void rknp_go_log_tramp(void *ud, int32_t level, const char *msg) {
	rknpGoLog((uintptr_t)ud, level, (char *)msg);
}

static inline const rknp_api_v1 *rknp_go_table(const void *p) { return (const rknp_api_v1 *)p; }

static inline rknp_status rknp_go_error_code(const rknp_api_v1 *a, const rknp_error *e) { return a->error_code(e); }
static inline const char *rknp_go_error_message(const rknp_api_v1 *a, const rknp_error *e) { return a->error_message(e); }
static inline void rknp_go_error_free(const rknp_api_v1 *a, rknp_error *e) { a->error_free(e); }
static inline uint32_t rknp_go_abi_version(const rknp_api_v1 *a) { return a->abi_version(); }
static inline const char *rknp_go_library_version(const rknp_api_v1 *a) { return a->library_version(); }

static inline rknp_status rknp_go_config_init(const rknp_api_v1 *a, rknp_config *c) {
	return a->config_init(c, (uint32_t)sizeof(*c));
}
static inline void rknp_go_config_set_log(rknp_config *c, uintptr_t h) {
	c->log_fn = rknp_go_log_tramp;
	c->log_user_data = (void *)h;
}
static inline rknp_status rknp_go_parent_new(const rknp_api_v1 *a, const rknp_config *c, rknp_parent **out, rknp_error **e) {
	return a->parent_new(c, out, e);
}
static inline rknp_status rknp_go_parent_start(const rknp_api_v1 *a, rknp_parent *p, const char *dir, int32_t pid, rknp_error **e) {
	return a->parent_start(p, dir, pid, e);
}
static inline rknp_status rknp_go_parent_network(const rknp_api_v1 *a, const rknp_parent *p, rknp_network *n, rknp_error **e) {
	n->struct_size = (uint32_t)sizeof(*n);
	return a->parent_network(p, n, e);
}
static inline uint32_t rknp_go_parent_opaque_count(const rknp_api_v1 *a, const rknp_parent *p) { return a->parent_opaque_count(p); }
static inline rknp_status rknp_go_parent_opaque_get(const rknp_api_v1 *a, const rknp_parent *p, uint32_t i, const char **k, const char **v, rknp_error **e) {
	return a->parent_opaque_get(p, i, k, v, e);
}
static inline rknp_status rknp_go_parent_stats(const rknp_api_v1 *a, const rknp_parent *p, rknp_stats *s, rknp_error **e) {
	s->struct_size = (uint32_t)sizeof(*s);
	return a->parent_stats(p, s, e);
}
static inline void rknp_go_parent_close(const rknp_api_v1 *a, rknp_parent *p) { a->parent_close(p); }
static inline void rknp_go_parent_free(const rknp_api_v1 *a, rknp_parent *p) { a->parent_free(p); }

static inline rknp_status rknp_go_child_configure(const rknp_api_v1 *a, const rknp_kv *kv, uint32_t n, const char *netns,
                                                  uintptr_t log_handle, char *dev, uint32_t dev_len, rknp_error **e) {
	rknp_child_options o;
	rknp_status s = a->child_options_init(&o, (uint32_t)sizeof(o));
	if (s != RKNP_OK)
		return s;
	o.detached_netns_path = netns;
	if (log_handle != 0) {
		o.log_fn = rknp_go_log_tramp;
		o.log_user_data = (void *)log_handle;
	}
	return a->child_configure(kv, n, &o, dev, dev_len, e);
}

/* Port forwarding (ABI 1.1): callers check rknp_go_has_forwards first. */
static inline int rknp_go_has_forwards(const rknp_api_v1 *a) {
	return RKNP_GO_HAS(a, forward_init) && RKNP_GO_HAS(a, parent_add_forward) &&
	       RKNP_GO_HAS(a, parent_remove_forward) && RKNP_GO_HAS(a, parent_list_forwards);
}
static inline rknp_status rknp_go_add_forward(const rknp_api_v1 *a, rknp_parent *p, uint32_t proto, const char *haddr,
                                              uint32_t hport, const char *gaddr, uint32_t gport, uint32_t *id, rknp_error **e) {
	rknp_forward f;
	rknp_status s = a->forward_init(&f, (uint32_t)sizeof(f));
	if (s != RKNP_OK)
		return s;
	f.protocol = proto;
	f.host_addr = haddr;
	f.host_port = hport;
	f.guest_addr = gaddr;
	f.guest_port = gport;
	return a->parent_add_forward(p, &f, id, e);
}
static inline rknp_status rknp_go_remove_forward(const rknp_api_v1 *a, rknp_parent *p, uint32_t id, rknp_error **e) {
	return a->parent_remove_forward(p, id, e);
}
/* out is C memory of cap elements; sets struct_size on each. */
static inline rknp_status rknp_go_list_forwards(const rknp_api_v1 *a, const rknp_parent *p, rknp_forward_info *out,
                                                uint32_t cap, uint32_t *count, rknp_error **e) {
	for (uint32_t i = 0; i < cap; i++)
		out[i].struct_size = (uint32_t)sizeof(out[i]);
	return a->parent_list_forwards(p, cap ? out : NULL, cap, count, e);
}
static inline rknp_forward_info *rknp_go_fwd_alloc(uint32_t n) {
	return (rknp_forward_info *)calloc(n ? n : 1, sizeof(rknp_forward_info));
}
static inline rknp_forward_info *rknp_go_fwd_at(rknp_forward_info *f, uint32_t i) { return &f[i]; }

/* The rknp_kv array passed to child_configure lives in C memory. */
static inline rknp_kv *rknp_go_kv_alloc(uint32_t n) { return (rknp_kv *)calloc(n ? n : 1, sizeof(rknp_kv)); }
static inline void rknp_go_kv_set(rknp_kv *kv, uint32_t i, const char *k, const char *v) {
	kv[i].key = k;
	kv[i].value = v;
}

#endif
