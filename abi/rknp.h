/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rknp.h - the stable C ABI of rknp, a rootlesskit network plugin.
 *
 * A plugin is a shared library that runs a user-mode TCP/IP stack in
 * rootlesskit's parent process and configures a tap device in the child's
 * network namespace. The ABI has two halves that mirror rootlesskit's network
 * driver protocol:
 *
 *   parent side  rknp_parent_new / _start / _network / _opaque_* / _close / _free
 *   child side   rknp_child_configure
 *
 * The parent side produces a list of key/value strings ("opaque") that the
 * caller carries to the child (rootlesskit's NetworkDriverOpaque) and passes
 * to rknp_child_configure unchanged.
 *
 * Loading: a loader resolves the single entry point rknp_get_api with dlsym
 * and asks for the ABI major it speaks. The returned function table is
 * append-only within a major: new functions are added at the end and
 * announced by a larger struct_size / abi_minor.
 *
 * Conventions:
 *  - Every function that can fail returns rknp_status (RKNP_OK == 0) and, if
 *    err is not NULL, stores a newly allocated rknp_error in *err on failure.
 *    The caller owns it and releases it with rknp_error_free. On success *err
 *    is set to NULL.
 *  - Strings are NUL-terminated UTF-8. Strings passed in are copied; the
 *    caller keeps ownership.
 *  - Versioned structs start with struct_size: the caller's
 *    sizeof(struct), as compiled against its copy of this header. Each
 *    minor that changed a struct froze its size: the RKNP_*_SIZE_x_y macros
 *    below each struct (offsetof + sizeof of the minor's last member). The
 *    library reads and writes a caller's struct as the newest minor whose
 *    frozen size is at most struct_size, and never touches a byte past
 *    struct_size:
 *      - below the struct's first frozen size: RKNP_ERR_INVALID_ARGUMENT
 *        (the *_init functions return it, nothing is written);
 *      - a frozen size: exactly that minor's fields;
 *      - between two frozen sizes (the sizeof of a header before 1.4
 *        includes tail padding): the older minor's fields; the bytes past
 *        its frozen size are the caller's padding and are never read as
 *        fields. On LP64, sizeof(rknp_config) was 88 in both the 1.0 and
 *        the 1.2 header (frozen sizes 84 and 86): 88 reads as 1.2, so a 1.0
 *        caller's padding bytes 84 and 85 are read as enable_dhcp and
 *        tcp_path (checked: 0 or 1, and 0..2; rknp_config_init and
 *        RKNP_CONFIG_INIT clear them), while the 1.3 field
 *        disable_sandbox at 86 is never read from a struct_size below 96;
 *      - beyond the newest frozen size (a caller built against a newer
 *        header): every field this library knows; the rest is ignored, so
 *        check rknp_abi_version() before relying on a field newer than
 *        the minor the library reports.
 *    Structs the caller fills (rknp_config, rknp_forward,
 *    rknp_child_options): fields the caller's minor lacks take their
 *    defaults. Structs the library fills (rknp_network, rknp_stats,
 *    rknp_forward_info): it fills the fields of the caller's minor, zeroes
 *    the rest of struct_size and leaves struct_size as the caller set it.
 *  - Layout rule since 1.4: a minor appends its fields at the previous
 *    header's sizeof (never inside its tail padding) and, where they would
 *    leave tail padding, ends them on an explicit reserved_x_y block, so
 *    that the struct has no tail padding and every minor's sizeof is its
 *    frozen size, distinct from all others. Reserved bytes are never read
 *    and never become fields; the initialisers set them to 0.
 *  - Initialise caller-filled structs with the static initialiser
 *    (RKNP_CONFIG_INIT, RKNP_FORWARD_INIT, RKNP_CHILD_OPTIONS_INIT) or the
 *    matching *_init function, which clears struct_size bytes and sets
 *    every default; both give the same struct. Appended fields default to
 *    0.
 *  - Nothing here raises C++ exceptions, installs signal handlers or changes
 *    process-wide state (signal dispositions, umask, cwd, namespaces of the
 *    calling thread).
 *
 * The header compiles as C99 and as C++.
 */
#ifndef RKNP_H
#define RKNP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RKNP_BUILDING_LIBRARY)
#define RKNP_API __attribute__((visibility("default")))
#else
#define RKNP_API
#endif

/** ABI major: incremented on any incompatible change. */
#define RKNP_ABI_MAJOR 1
/**
 * ABI minor: incremented when functions or struct fields are appended.
 *   1.0  the first release
 *   1.1  port forwarding: rknp_forward, rknp_forward_info and the table's
 *        forward_init, parent_add_forward, parent_remove_forward,
 *        parent_list_forwards
 *   1.2  rknp_config.enable_dhcp and tcp_path, rknp_stats.segments_merged and
 *        acks_superseded, rknp_child_options.link_only
 *   1.3  rknp_config.disable_sandbox, max_flows and max_new_flows_per_sec,
 *        rknp_network.libslirp_version, rknp_stats.frames_truncated to
 *        sandbox
 *   1.4  rknp_config.tcp_peek_mode, rknp_stats.tcp_peek_mode; the
 *        reserved_x_y tails (layout rule above) and the RKNP_*_INIT
 *        initialisers; no new functions
 *   1.5  rknp_config.udp_path, rknp_stats.udp_fast_flows and
 *        udp_fast_dropped; no new functions
 *   1.6  rknp_config.guest_address, gateway, dns_address, map_guest_addr,
 *        map_host_loopback and network_model (pasta's address model);
 *        no new functions
 *   1.7  rknp_config.ipv6_network, ipv6_gateway, map_guest_addr6,
 *        map_host_loopback6, dns_address6 and disable_ipv4 (pasta's
 *        address model for IPv6, and IPv6 alone); rknp_stats'
 *        published-port counters: tcp_forward_accepted to
 *        udp_forward_full; rknp_forward.guest_addr outside the network (a
 *        routed address) and IPv6; rknp_forward_info.guest_addr_full (an
 *        IPv6 guest_addr in full: filled for callers whose struct_size
 *        covers it); rknp_forward.flags and handoff_fd
 *        (RKNP_FORWARD_HANDOFF_LOOPBACK: a TCP forward's loopback clients
 *        handed to the caller, rknp_handoff); no new functions
 */
#define RKNP_ABI_MINOR 7
/** rknp_abi_version() packs both: (major << 16) | minor. */
#define RKNP_ABI_VERSION ((uint32_t)((RKNP_ABI_MAJOR << 16) | RKNP_ABI_MINOR))

/* ------------------------------------------------------------------------ */
/* Status codes and errors                                                  */
/* ------------------------------------------------------------------------ */

typedef int32_t rknp_status;

enum {
    RKNP_OK = 0,
    RKNP_ERR_INVALID_ARGUMENT = 1, /* NULL handle, bad option value, ... */
    RKNP_ERR_STATE = 2,            /* call not valid in the handle's state */
    RKNP_ERR_SYSTEM = 3,           /* an OS call failed (errno in message) */
    RKNP_ERR_PERMISSION = 4,       /* hand-over refused, EPERM, ... */
    RKNP_ERR_TIMEOUT = 5,          /* the peer did not answer in time */
    RKNP_ERR_UNSUPPORTED = 6,      /* feature not available in this build */
    RKNP_ERR_PROTOCOL = 7,         /* malformed hand-over message */
    RKNP_ERR_INTERNAL = 8          /* a bug: please report */
};

/** Opaque error: a status code plus a message. Owned by the caller. When
 *  the process is out of memory even for the error, a call hands out a
 *  shared "out of memory" one (code RKNP_ERR_SYSTEM) instead of none;
 *  rknp_error_free accepts it like any other. */
typedef struct rknp_error rknp_error;

/** The code of err; RKNP_ERR_INVALID_ARGUMENT if err is NULL.
 *  Thread-safe on distinct errors. */
RKNP_API rknp_status rknp_error_code(const rknp_error *err);
/** The message of err, valid until rknp_error_free(err); "" if err is NULL.
 *  Thread-safe on distinct errors. */
RKNP_API const char *rknp_error_message(const rknp_error *err);
/** Releases err. NULL is a no-op. */
RKNP_API void rknp_error_free(rknp_error *err);

/* ------------------------------------------------------------------------ */
/* Versions                                                                 */
/* ------------------------------------------------------------------------ */

/** RKNP_ABI_VERSION of the loaded library. Thread-safe. */
RKNP_API uint32_t rknp_abi_version(void);
/** Library version string, e.g. "1.7.0 (libslirp 4.7.0)". Static storage,
 *  never freed. Thread-safe. */
RKNP_API const char *rknp_library_version(void);

/* ------------------------------------------------------------------------ */
/* Logging                                                                  */
/* ------------------------------------------------------------------------ */

enum {
    RKNP_LOG_ERROR = 0,
    RKNP_LOG_WARN = 1,
    RKNP_LOG_INFO = 2,
    RKNP_LOG_DEBUG = 3
};

/**
 * Log callback. Called from the thread calling into the library or from
 * the parent's logger thread, which delivers the stack thread's records in
 * order (never from the stack thread itself, which only queues them; a
 * full queue drops records and reports how many), so it must be
 * thread-safe. msg is valid only for the duration of the call. The library
 * never writes to stdout or stderr.
 *
 * Calling the library from inside the callback. "Inside" means while the
 * calling thread runs any parent's log callback (a parent's or another
 * one's, on the logger thread or on a thread in a library call):
 *  - these work as anywhere else: the functions without a parent handle
 *    (rknp_error_*, the versions, the *_init functions,
 *    rknp_child_configure), rknp_parent_new, rknp_parent_network,
 *    _opaque_count, _opaque_get, _stats, _list_forwards, _add_forward and
 *    _remove_forward. A forward added from the callback logs its own line:
 *    the callback runs again, nested, on the same thread;
 *  - rknp_parent_close only asks the stack to stop and returns at once
 *    (rknp_parent_close);
 *  - rknp_parent_start fails with RKNP_ERR_STATE, its message saying it
 *    was called from the log callback;
 *  - rknp_parent_free does not free the handle (rknp_parent_free).
 * None of these deadlocks: the library runs the callback holding no lock
 * that they take (the one that orders log records is bypassed by a call
 * from inside the callback), and _add_forward and _remove_forward wait
 * only for the stack thread, which never waits for the callback.
 */
typedef void (*rknp_log_fn)(void *user_data, int32_t level, const char *msg);

/* ------------------------------------------------------------------------ */
/* Configuration (parent side)                                              */
/* ------------------------------------------------------------------------ */

/**
 * Parent configuration. Version 1 fields below; later versions only append.
 * All pointers may be NULL (meaning "default"); strings are copied by
 * rknp_parent_new.
 */
typedef struct rknp_config {
    uint32_t struct_size;         /* set by rknp_config_init */
    uint32_t mtu;                 /* 68..65520, default 65520 */
    const char *cidr;             /* IPv4 network, default "10.0.2.0/24";
                                     prefix length 1..25 (guest is .100),
                                     1..30 with guest_address (1.6) */
    const char *ifname;           /* tap name in the child, default "tap0" */
    uint8_t disable_host_loopback; /* 1: gateway does not reach host lo */
    uint8_t enable_ipv6;          /* 1: fd00::/64, gw fd00::2, dns fd00::3 */
    uint8_t disable_dns;          /* 1: no DNS forwarder at .3 / fd00::3 */
    uint8_t disable_offload;      /* 1: plain tap frames, no virtio-net
                                     header / TSO / checksum offload */
    const char *ipv6_address;     /* guest IPv6 address in fd00::/64;
                                     NULL: SLAAC */
    const char *outbound_addr;    /* host IPv4 address to bind outbound
                                     connections to, NULL: any */
    const char *outbound_addr6;   /* host IPv6 address, NULL: any */
    const char *mac_address;      /* tap MAC "xx:xx:xx:xx:xx:xx", NULL:
                                     kernel-chosen */
    rknp_log_fn log_fn;           /* NULL: messages are dropped */
    void *log_user_data;          /* passed to log_fn */
    uint32_t handover_timeout_ms; /* child side wait for the parent's
                                     acknowledgement; default 10000 */
    /* 1.2 */
    uint8_t enable_dhcp;          /* 1: libslirp's DHCP server answers the
                                     guest (leases from .15); default 0:
                                     the child configures its address
                                     itself and needs none */
    uint8_t tcp_path;             /* RKNP_TCP_PATH_*: which stack carries
                                     the guest's outbound TCP */
    /* 1.3 */
    uint8_t disable_sandbox;      /* 1: the stack thread runs without its
                                     seccomp filter and Landlock ruleset
                                     (default 0: both, where the kernel
                                     has them; see rknp_stats.sandbox) */
    uint32_t max_flows;           /* most guest flows (TCP and UDP, both
                                     TCP paths) holding a host socket at
                                     once; beyond it new ones are refused
                                     and counted. 0: the default, 16384,
                                     lowered so that a quarter of the
                                     process's RLIMIT_NOFILE stays free */
    uint32_t max_new_flows_per_sec; /* new guest flows per second (bursts
                                     of that many); more are refused and
                                     counted. 0: the default, 20000 */
    /* 1.4 */
    uint8_t tcp_peek_mode;        /* RKNP_TCP_PEEK_*: how the TCP fast path
                                     reads host sockets; a test and
                                     diagnostic knob, leave it 0 */
    uint8_t reserved_1_4[7];      /* 0; never a field (layout rule) */
    /* 1.5 */
    uint8_t udp_path;             /* RKNP_UDP_PATH_*: which stack carries
                                     the guest's outbound UDP */
    uint8_t reserved_1_5[7];      /* 0; never a field (layout rule) */
    /* 1.6: where the network's addresses are (IPv4, dot-decimal) */
    const char *guest_address;    /* the child's address, in cidr; NULL: the
                                     cidr's 100th address (its prefix
                                     length must then be at most 25) */
    const char *gateway;          /* in cidr, not guest_address; NULL: the
                                     2nd address */
    const char *dns_address;      /* where DNS (port 53) is forwarded to the
                                     host's resolver (its first nameserver);
                                     NULL: the 3rd address of cidr. Outside
                                     cidr needs RKNP_NETWORK_MODEL_HOST */
    const char *map_guest_addr;   /* an address that reaches the host at
                                     guest_address (pasta's
                                     --map-guest-addr); NULL: none; needs
                                     RKNP_NETWORK_MODEL_HOST */
    const char *map_host_loopback; /* an address that reaches the host's
                                     127.0.0.1, besides the gateway (pasta's
                                     --map-host-loopback); NULL: none;
                                     needs RKNP_NETWORK_MODEL_HOST */
    uint8_t network_model;        /* RKNP_NETWORK_MODEL_*: what cidr's other
                                     addresses are */
    uint8_t reserved_1_6[7];      /* 0; never a field (layout rule) */
    /* 1.7: pasta's model for IPv6 (enable_ipv6 and
       RKNP_NETWORK_MODEL_HOST), and IPv6 alone */
    const char *ipv6_network;     /* "ADDR/LEN", LEN 1..128: the host's
                                     IPv6 network; its other addresses are
                                     the host's neighbours (NDP answered,
                                     traffic on the fast paths, libslirp's
                                     IPv6 off: no router advertisements,
                                     no fd00::3). Needs ipv6_address in it
                                     and RKNP_NETWORK_MODEL_HOST. NULL:
                                     libslirp's fd00::/64 */
    const char *ipv6_gateway;     /* with ipv6_network: the default
                                     gateway, in it or link-local (fe80::/10),
                                     not ipv6_address; NULL: the network's
                                     ::1 (or ::2 when that is the guest's) */
    const char *map_guest_addr6;  /* with ipv6_network: an IPv6 address that
                                     reaches the host at ipv6_address; NULL:
                                     none */
    const char *map_host_loopback6; /* with ipv6_network: an IPv6 address
                                     that reaches the host's ::1, besides
                                     the gateway; NULL: none */
    uint8_t disable_ipv4;         /* 1: the child gets no IPv4 address or
                                     route and guest IPv4 and ARP frames
                                     are dropped (pasta's -6); needs
                                     enable_ipv6 and enable_dhcp 0 */
    uint8_t reserved_1_7[7];      /* 0; never a field (layout rule) */
    const char *dns_address6;     /* with ipv6_network: an IPv6 address
                                     where DNS (port 53) is forwarded to
                                     the host's resolver (its first
                                     nameserver), as dns_address is for
                                     IPv4 (pasta's IPv6 --dns-forward):
                                     its first IPv6 one (not link-local),
                                     else its first IPv4 one; neither the
                                     ipv6_address nor the ipv6_gateway nor
                                     a mapped address; independent of
                                     disable_dns; NULL: none */
} rknp_config;

/** rknp_config.tcp_path (1.2). */
enum {
    RKNP_TCP_PATH_DEFAULT = 0, /* the library's choice: since 1.3 the fast
                                  path (libslirp in 1.2) */
    RKNP_TCP_PATH_FAST = 1,    /* each guest connection on its own host
                                  socket, scaled windows, 64 KiB frames
                                  (needs offloads, else libslirp; host
                                  sockets read as tcp_peek_mode says) */
    RKNP_TCP_PATH_SLIRP = 2    /* all TCP through libslirp */
};

/**
 * rknp_config.tcp_peek_mode (1.4). The fast path sends the guest what it
 * peeks from a host socket and drops it from the socket once the guest
 * acknowledged it, so a retransmission peeks again. A test and diagnostic
 * knob: the default is right everywhere; the other values force one
 * method, e.g. to test the older kernels' method on a newer kernel.
 * rknp_stats.tcp_peek_mode reports the method in force.
 */
enum {
    RKNP_TCP_PEEK_AUTO = 0,    /* probe SO_PEEK_OFF on a TCP socket at start:
                                  _OFFSET when the kernel has it (Linux >=
                                  6.9), else _DISCARD */
    RKNP_TCP_PEEK_OFFSET = 1,  /* SO_PEEK_OFF: each peek starts where the
                                  last one ended; rknp_parent_start fails
                                  with RKNP_ERR_UNSUPPORTED, naming the
                                  option, if the kernel lacks it */
    RKNP_TCP_PEEK_DISCARD = 2  /* peek from the start of the receive queue,
                                  the bytes already sent to the guest into
                                  a discard buffer (kernels before 6.9) */
};

/**
 * rknp_config.udp_path (1.5). rknp_stats.udp_fast_flows and
 * udp_fast_dropped count the fast path's work.
 */
enum {
    RKNP_UDP_PATH_DEFAULT = 0, /* the library's choice: the fast path */
    RKNP_UDP_PATH_FAST = 1,    /* each guest UDP 4-tuple to an outside
                                  destination on its own connected host
                                  socket, datagrams batched (needs
                                  offloads: vnet headers on the tap, else
                                  libslirp) */
    RKNP_UDP_PATH_SLIRP = 2    /* all UDP through libslirp */
};

/**
 * rknp_config.network_model (1.6): what the network's addresses other than
 * the guest's, the gateway and the DNS forwarder are.
 */
enum {
    RKNP_NETWORK_MODEL_SLIRP = 0, /* libslirp's virtual network (slirp4netns,
                                     rootlesskit): they are the host's
                                     loopback, unless disable_host_loopback */
    RKNP_NETWORK_MODEL_HOST = 1   /* pasta's: cidr is the host's own
                                     network, they are its neighbours,
                                     reached through the host; so is the
                                     gateway when disable_host_loopback is
                                     set. The fast paths carry all of it:
                                     needs tcp_path and udp_path other than
                                     _SLIRP and offloads on */
};

/**
 * Sizes of rknp_config as each minor that changed it defined it. On LP64
 * the 1.0 and 1.2 headers' sizeof was 88 for both (tail padding): see the
 * struct_size rules at the top.
 */
#define RKNP_CONFIG_SIZE_1_0 \
    (offsetof(rknp_config, handover_timeout_ms) + sizeof(uint32_t))
#define RKNP_CONFIG_SIZE_1_2 \
    (offsetof(rknp_config, tcp_path) + sizeof(uint8_t))
#define RKNP_CONFIG_SIZE_1_3 \
    (offsetof(rknp_config, max_new_flows_per_sec) + sizeof(uint32_t))
#define RKNP_CONFIG_SIZE_1_4 \
    (offsetof(rknp_config, reserved_1_4) + 7)
#define RKNP_CONFIG_SIZE_1_5 \
    (offsetof(rknp_config, reserved_1_5) + 7)
#define RKNP_CONFIG_SIZE_1_6 \
    (offsetof(rknp_config, reserved_1_6) + 7)
#define RKNP_CONFIG_SIZE_1_7 \
    (offsetof(rknp_config, dns_address6) + sizeof(const char *))

/**
 * Static initialiser with every default, the same struct as
 * rknp_config_init(&cfg, sizeof cfg) gives:
 *   rknp_config cfg = RKNP_CONFIG_INIT;
 */
#define RKNP_CONFIG_INIT                                                   \
    { sizeof(rknp_config), 65520, NULL, NULL, 0, 0, 0, 0, NULL, NULL, NULL, \
      NULL, NULL, NULL, 10000, 0, RKNP_TCP_PATH_DEFAULT, 0, 0, 0,          \
      RKNP_TCP_PEEK_AUTO, { 0 }, RKNP_UDP_PATH_DEFAULT, { 0 }, NULL, NULL,  \
      NULL, NULL, NULL, RKNP_NETWORK_MODEL_SLIRP, { 0 }, NULL, NULL, NULL,  \
      NULL, 0, { 0 }, NULL }

/**
 * Clears struct_size bytes of cfg (pass sizeof(rknp_config)), sets every
 * default the library knows and struct_size. Returns
 * RKNP_ERR_INVALID_ARGUMENT if cfg is NULL or struct_size is smaller than
 * RKNP_CONFIG_SIZE_1_0. Thread-safe.
 */
RKNP_API rknp_status rknp_config_init(rknp_config *cfg, uint32_t struct_size);

/* ------------------------------------------------------------------------ */
/* Parent side                                                              */
/* ------------------------------------------------------------------------ */

/** Opaque parent handle: one libslirp stack and the thread that runs it. */
typedef struct rknp_parent rknp_parent;

/**
 * Validates cfg and creates a stopped parent. Every bad value is reported
 * as RKNP_ERR_INVALID_ARGUMENT with a message naming the option and value.
 * On success *out owns a handle to release with rknp_parent_free.
 * Thread-safe.
 */
RKNP_API rknp_status rknp_parent_new(const rknp_config *cfg,
                                     rknp_parent **out, rknp_error **err);

/**
 * Starts the stack: creates the hand-over socket "rknp.sock" (mode 0600)
 * in state_dir (path must fit a unix socket address), starts the stack
 * thread and returns without waiting for the child. state_dir must be a
 * directory (not a symlink) owned by the caller's euid that group and
 * others cannot write to (RKNP_ERR_PERMISSION otherwise). Only a process
 * whose pid is child_pid and whose uid is the caller's, and which knows the
 * token in the opaque pairs, may hand over the tap; other peers are refused
 * and counted (rknp_stats.handovers_refused), and logged at RKNP_LOG_ERROR,
 * at most 10 lines a minute (a notice says when the lines stop; the next
 * line says how many were left out). A start that fails leaves the handle
 * as it was before it (no socket file, no thread) and may be retried; once
 * one succeeded, or after rknp_parent_close, RKNP_ERR_STATE. From inside
 * the log callback: RKNP_ERR_STATE (rknp_log_fn). Thread-safe with respect
 * to other calls on the same handle.
 */
RKNP_API rknp_status rknp_parent_start(rknp_parent *p, const char *state_dir,
                                       int32_t child_pid, rknp_error **err);

/** Network the child must use. Strings are NUL-terminated in place. */
typedef struct rknp_network {
    uint32_t struct_size;   /* set by the caller: sizeof(rknp_network) */
    uint32_t mtu;
    char ifname[16];
    char ip[16];            /* guest IPv4 address, dotted quad */
    uint32_t prefix_len;
    char gateway[16];
    uint32_t dns_count;     /* 0 (disable_dns), 1 or 2 (IPv4, IPv6) */
    char dns[2][46];
    char ipv6_gateway[46];  /* "" unless IPv6 is enabled */
    /* 1.3 */
    char libslirp_version[32]; /* the loaded libslirp's version string */
    char reserved_1_3[2];   /* the 1.3 header's tail padding, named in 1.4;
                               never a field */
} rknp_network;

#define RKNP_NETWORK_SIZE_1_0 \
    (offsetof(rknp_network, ipv6_gateway) + 46)
#define RKNP_NETWORK_SIZE_1_3 \
    (offsetof(rknp_network, libslirp_version) + 32)

/**
 * Fills *out (whose struct_size the caller has set) with the network the
 * child uses. Valid on any handle that rknp_parent_new returned.
 * Thread-safe.
 */
RKNP_API rknp_status rknp_parent_network(const rknp_parent *p,
                                         rknp_network *out, rknp_error **err);

/**
 * Number of opaque key/value pairs the child side needs; 0 before
 * rknp_parent_start succeeded. Thread-safe.
 */
RKNP_API uint32_t rknp_parent_opaque_count(const rknp_parent *p);

/**
 * The index-th opaque pair. *key and *value stay valid until
 * rknp_parent_free(p). Returns RKNP_ERR_INVALID_ARGUMENT when index is out of
 * range. Thread-safe.
 */
RKNP_API rknp_status rknp_parent_opaque_get(const rknp_parent *p,
                                            uint32_t index, const char **key,
                                            const char **value,
                                            rknp_error **err);

/** Counters of a running parent. Later versions append fields. */
typedef struct rknp_stats {
    uint32_t struct_size;          /* set by the caller */
    uint32_t tap_attached;         /* 1 once the child handed over the tap */
    uint64_t frames_from_tap;      /* guest -> stack */
    uint64_t bytes_from_tap;
    uint64_t frames_to_tap;        /* stack -> guest */
    uint64_t bytes_to_tap;
    uint64_t frames_dropped;       /* frames not delivered: failed writes
                                      to the guest, malformed frames from
                                      it, IPv4 fragments that could not be
                                      reassembled */
    uint64_t handovers_refused;    /* peers refused on the hand-over socket
                                      (every one; the log has a few) */
    /* 1.2 */
    uint64_t segments_merged;      /* guest-bound TCP segments that went out
                                      merged with others in a GSO frame */
    uint64_t acks_superseded;      /* guest-bound pure ACKs left out because
                                      a later one of the flow acked more */
    /* 1.3 */
    uint64_t frames_truncated;     /* guest frames longer than the read
                                      buffer (also in frames_dropped) */
    uint64_t frames_filtered;      /* guest frames refused by policy: other
                                      ethertypes than ARP/IPv4/IPv6, source
                                      outside the guest's network or prefix
                                      (also in frames_dropped) */
    uint64_t flows_refused;        /* new guest flows refused: max_flows */
    uint64_t flows_rate_limited;   /* new guest flows refused:
                                      max_new_flows_per_sec */
    uint64_t host_sockets;         /* host sockets held for guest flows
                                      now (both TCP paths, UDP) */
    uint64_t tcp_fast_flows;       /* TCP flows on the fast path now */
    uint64_t tcp_fast_retransmits; /* segments the fast path sent the guest
                                      again */
    uint32_t sandbox;              /* RKNP_SANDBOX_* bits in force on the
                                      stack thread */
    uint32_t reserved_1_3;         /* the 1.3 header's tail padding, named
                                      in 1.4; never a field */
    /* 1.4 */
    uint32_t tcp_peek_mode;        /* RKNP_TCP_PEEK_OFFSET or _DISCARD: how
                                      the TCP fast path reads host sockets;
                                      0 while the fast path is off */
    uint32_t reserved_1_4;         /* never a field (layout rule) */
    /* 1.5 */
    uint64_t udp_fast_flows;       /* UDP flows on the fast path now */
    uint64_t udp_fast_dropped;     /* guest datagrams the UDP fast path
                                      dropped: the host socket's send
                                      failed (new flows refused at the
                                      flow limits are counted in
                                      flows_refused and flows_rate_limited
                                      instead) */
    /* 1.7: published ports' clients (rknp_forward). They have their own
       caps and rates, never the guest's: not in flows_refused,
       flows_rate_limited or host_sockets. */
    uint64_t tcp_forward_accepted; /* connections TCP forwards accepted */
    uint64_t tcp_forward_refused;  /* of those, closed at once (every
                                      reason: the two below, no socket, no
                                      guest) */
    uint64_t tcp_forward_full;     /* of those, at the forward's or all
                                      forwards' cap */
    uint64_t tcp_forward_rate_limited; /* of those, over the forward's
                                      new-connection rate */
    uint64_t tcp_forward_flows;    /* forwarded TCP connections now (also
                                      in tcp_fast_flows) */
    uint64_t udp_forward_clients;  /* UDP forwards' clients now (also in
                                      udp_fast_flows) */
    uint64_t udp_forward_admitted; /* new UDP clients given a place */
    uint64_t udp_forward_rate_limited; /* new UDP clients over the forward's
                                      rate (their datagram dropped) */
    uint64_t udp_forward_evicted;  /* UDP clients evicted, the oldest
                                      unanswered first, for a new one */
    uint64_t udp_forward_full;     /* new UDP clients refused: no room (every
                                      client an answered one of another
                                      forward) */
} rknp_stats;

/** rknp_stats.sandbox bits (1.3). */
enum {
    RKNP_SANDBOX_SECCOMP = 1u << 0,  /* syscall allowlist on the thread */
    RKNP_SANDBOX_LANDLOCK = 1u << 1  /* no file system access */
};

#define RKNP_STATS_SIZE_1_0 \
    (offsetof(rknp_stats, handovers_refused) + sizeof(uint64_t))
#define RKNP_STATS_SIZE_1_2 \
    (offsetof(rknp_stats, acks_superseded) + sizeof(uint64_t))
#define RKNP_STATS_SIZE_1_3 \
    (offsetof(rknp_stats, sandbox) + sizeof(uint32_t))
#define RKNP_STATS_SIZE_1_4 \
    (offsetof(rknp_stats, reserved_1_4) + sizeof(uint32_t))
#define RKNP_STATS_SIZE_1_5 \
    (offsetof(rknp_stats, udp_fast_dropped) + sizeof(uint64_t))
#define RKNP_STATS_SIZE_1_7 \
    (offsetof(rknp_stats, udp_forward_full) + sizeof(uint64_t))

/** Fills *out with a snapshot of the counters. Thread-safe. */
RKNP_API rknp_status rknp_parent_stats(const rknp_parent *p, rknp_stats *out,
                                       rknp_error **err);

/**
 * Stops the stack thread and releases the stack, the tap fd and the
 * hand-over socket (the socket file is removed). Blocks until the thread
 * has exited and every queued log record was delivered. Idempotent;
 * callable from any thread except from inside the log callback (there it
 * only asks the stack to stop and returns at once; a later call from
 * outside the callback waits; rknp_log_fn). NULL is a no-op. The handle
 * stays valid for rknp_parent_free and the query functions.
 */
RKNP_API void rknp_parent_close(rknp_parent *p);

/**
 * Closes p if needed and frees it. NULL is a no-op. Must be called once,
 * when no other thread uses p, and not from inside the log callback: there
 * the thread is still using p (the library call that logged, or the
 * library's logger thread, which cannot wait for itself), so the call is
 * refused: p is not freed and stays valid, it is asked to stop as
 * rknp_parent_close from the callback does, and the first refusal on p is
 * logged at RKNP_LOG_ERROR. Call rknp_parent_free(p) again from outside
 * the callback; that call frees it.
 */
RKNP_API void rknp_parent_free(rknp_parent *p);

/* ------------------------------------------------------------------------ */
/* Port forwarding (parent side)                                            */
/* ------------------------------------------------------------------------ */

enum { RKNP_PROTO_TCP = 0, RKNP_PROTO_UDP = 1 };

/**
 * A forward from a host address and port to a guest port. Clients on the
 * host's loopback reach the guest from the gateway address; other clients
 * keep their own source address. To an IPv6 guest_addr (1.7), a client
 * without an IPv6 address the guest could answer (loopback, IPv4) comes
 * from map_host_loopback6 where set, else from the IPv6 gateway. With
 * disable_host_loopback, libslirp drops UDP replies to loopback clients
 * (TCP is unaffected). Later versions append fields.
 */
typedef struct rknp_forward {
    uint32_t struct_size;   /* set by rknp_forward_init */
    uint32_t protocol;      /* RKNP_PROTO_TCP or RKNP_PROTO_UDP */
    const char *host_addr;  /* IPv4 or IPv6 literal; NULL: "0.0.0.0" */
    uint32_t host_port;     /* 1..65535 */
    uint32_t guest_port;    /* 1..65535 */
    const char *guest_addr; /* IPv4 literal (or, since 1.7, IPv6 with
                               enable_ipv6); NULL: the guest's IPv4
                               address. In the guest's network (cidr, or
                               the IPv6 one): a guest address; outside it
                               (since 1.7; before, refused): a unicast
                               address routed behind the guest, such as a
                               container on a bridge network in the
                               namespace, reached through the guest's MAC,
                               whose replies are taken for this forward's
                               connections only. An IPv6 one is the TCP
                               and UDP fast paths' alone: refused with
                               RKNP_ERR_UNSUPPORTED on libslirp
                               (tcp_path/udp_path _SLIRP), dropped with
                               an error logged should the tap come
                               without offloads */
    /* 1.7 */
    uint32_t flags;         /* RKNP_FORWARD_* bits; 0: none */
    int32_t handoff_fd;     /* with RKNP_FORWARD_HANDOFF_LOOPBACK: where
                               the loopback clients go (below); read
                               only with that flag */
} rknp_forward;

#define RKNP_FORWARD_SIZE_1_1 \
    (offsetof(rknp_forward, guest_addr) + sizeof(const char *))
#define RKNP_FORWARD_SIZE_1_7 \
    (offsetof(rknp_forward, handoff_fd) + sizeof(int32_t))

/**
 * rknp_forward.flags (1.7).
 *
 * RKNP_FORWARD_HANDOFF_LOOPBACK: a TCP forward's connections from a
 * loopback client (127.0.0.0/8, ::1) do not enter the stack: each is
 * handed, accepted, to the caller, which may carry it to the guest past
 * the tap (pasta splices such clients to the namespace's loopback or its
 * address). handoff_fd is the caller's end of an AF_UNIX SOCK_SEQPACKET
 * socket (a socketpair); the library keeps a duplicate of it for as long
 * as the forward lives (the caller may close its own) and sends, per such
 * connection, one message: an rknp_handoff as its data and the
 * connection's fd (non-blocking, close-on-exec once received with
 * MSG_CMSG_CLOEXEC) in one SCM_RIGHTS control message. The caller then
 * owns that fd; getsockname and getpeername on it give the host address
 * the client reached and the client. A message that cannot be sent at
 * once (the caller's receive queue full, its end closed) resets the
 * client. Other clients keep the stack's path. The TCP fast path does
 * this; a forward libslirp carries (tcp_path RKNP_TCP_PATH_SLIRP, a tap
 * without vnet headers) ignores the flag: its loopback clients take the
 * stack's path. RKNP_ERR_INVALID_ARGUMENT for the flag on UDP, for
 * unknown bits and for a handoff_fd that is not an AF_UNIX
 * SOCK_SEQPACKET socket.
 */
enum { RKNP_FORWARD_HANDOFF_LOOPBACK = 1 };

/** The data of a handoff message (RKNP_FORWARD_HANDOFF_LOOPBACK). A later
 *  minor may append fields: read min(struct_size, the bytes received,
 *  sizeof(rknp_handoff)). */
typedef struct rknp_handoff {
    uint32_t struct_size;   /* the library's sizeof(rknp_handoff) */
    uint32_t guest_port;    /* the forward's guest port */
} rknp_handoff;

/** Static initialiser with the defaults, the same struct as
 *  rknp_forward_init(&fwd, sizeof fwd) gives. */
#define RKNP_FORWARD_INIT \
    { sizeof(rknp_forward), RKNP_PROTO_TCP, NULL, 0, 0, NULL, 0, 0 }

/** Clears struct_size bytes of fwd (pass sizeof(rknp_forward)), sets the
 *  defaults and struct_size. RKNP_ERR_INVALID_ARGUMENT if fwd is NULL or
 *  struct_size is below RKNP_FORWARD_SIZE_1_1. Thread-safe. */
RKNP_API rknp_status rknp_forward_init(rknp_forward *fwd,
                                       uint32_t struct_size);

/**
 * Opens the host socket and starts forwarding; *id_out receives an id for
 * rknp_parent_remove_forward. Fails with RKNP_ERR_INVALID_ARGUMENT for bad
 * values or a duplicate (same protocol, host address and port), with
 * RKNP_ERR_SYSTEM when the host port cannot be bound (in use, privileged),
 * and with RKNP_ERR_STATE unless the parent is running. Thread-safe: the
 * request runs on the stack thread and this call waits for it.
 */
RKNP_API rknp_status rknp_parent_add_forward(rknp_parent *p,
                                             const rknp_forward *fwd,
                                             uint32_t *id_out,
                                             rknp_error **err);

/** Stops forward id and closes its host socket (established connections
 *  keep running). Unknown ids are RKNP_ERR_INVALID_ARGUMENT, a parent that
 *  is not running RKNP_ERR_STATE. Thread-safe. */
RKNP_API rknp_status rknp_parent_remove_forward(rknp_parent *p, uint32_t id,
                                                rknp_error **err);

/** One active forward, as listed. Strings are NUL-terminated in place. */
typedef struct rknp_forward_info {
    uint32_t struct_size;   /* set by the caller */
    uint32_t id;
    uint32_t protocol;
    uint32_t host_port;
    uint32_t guest_port;
    char host_addr[46];
    char guest_addr[16];
    char reserved_1_1[2];   /* the 1.1 header's tail padding, named in 1.4;
                               never a field */
    /* 1.7 */
    char guest_addr_full[46]; /* the guest address in full, IPv4 or IPv6
                               (guest_addr holds an IPv4 one only and is
                               "" for an IPv6 one) */
    char reserved_1_7[2];   /* 0; never a field (layout rule) */
} rknp_forward_info;

#define RKNP_FORWARD_INFO_SIZE_1_1 \
    (offsetof(rknp_forward_info, guest_addr) + 16)
#define RKNP_FORWARD_INFO_SIZE_1_7 \
    (offsetof(rknp_forward_info, reserved_1_7) + 2)

/**
 * Copies up to capacity active forwards (ordered by id) into out, an array
 * whose elements all carry the same struct_size (the caller's
 * sizeof(rknp_forward_info), which is also the library's step through the
 * array; RKNP_ERR_INVALID_ARGUMENT if they differ), and stores the total number
 * of forwards in *count (which may exceed capacity: call again with a larger
 * array). out may be NULL when capacity is 0. A closed parent has no
 * forwards (*count is 0). Thread-safe.
 */
RKNP_API rknp_status rknp_parent_list_forwards(const rknp_parent *p,
                                               rknp_forward_info *out,
                                               uint32_t capacity,
                                               uint32_t *count,
                                               rknp_error **err);

/* ------------------------------------------------------------------------ */
/* Child side                                                               */
/* ------------------------------------------------------------------------ */

/** One opaque pair, as produced by rknp_parent_opaque_get. */
typedef struct rknp_kv {
    const char *key;
    const char *value;
} rknp_kv;

/** Child-side options. Later versions append fields. */
typedef struct rknp_child_options {
    uint32_t struct_size;        /* set by rknp_child_options_init */
    const char *detached_netns_path; /* NULL: the caller's network namespace;
                                        else a netns file entered on a
                                        private thread of the library */
    rknp_log_fn log_fn;          /* NULL: messages are dropped; called
                                    on the calling thread only, also with
                                    detached_netns_path */
    void *log_user_data;
    /* 1.2 */
    uint8_t link_only;           /* 1: create the tap, set it up (MTU, MAC,
                                    offloads) and hand it over, but leave
                                    addresses and routes to the caller (as
                                    slirp4netns without --configure) */
    uint8_t reserved_1_2[7];     /* the 1.2 header's tail padding on LP64,
                                    named in 1.4; never a field */
} rknp_child_options;

#define RKNP_CHILD_OPTIONS_SIZE_1_0 \
    (offsetof(rknp_child_options, log_user_data) + sizeof(void *))
#define RKNP_CHILD_OPTIONS_SIZE_1_2 \
    (offsetof(rknp_child_options, link_only) + sizeof(uint8_t))

/** Static initialiser with the defaults, the same struct as
 *  rknp_child_options_init(&opts, sizeof opts) gives. */
#define RKNP_CHILD_OPTIONS_INIT \
    { sizeof(rknp_child_options), NULL, NULL, NULL, 0, { 0 } }

/** Clears struct_size bytes of opts (pass sizeof(rknp_child_options)), sets
 *  the defaults and struct_size. RKNP_ERR_INVALID_ARGUMENT if opts is NULL
 *  or struct_size is below RKNP_CHILD_OPTIONS_SIZE_1_0. Thread-safe. */
RKNP_API rknp_status rknp_child_options_init(rknp_child_options *opts,
                                             uint32_t struct_size);

/**
 * Runs in the child (inside the rootlesskit user namespace). Creates the tap
 * named by the opaque pairs, brings lo and the tap up, sets MTU, MAC, IPv4
 * address, default route (and IPv6 when enabled) with netlink, hands the tap
 * fd to the parent and returns once the parent acknowledged it. On success
 * the device name is copied to devname (at most devname_len bytes including
 * the NUL; 16 is always enough). The caller's thread never changes network
 * namespace. Thread-safe (no shared state), but configuring the same device
 * twice fails.
 */
RKNP_API rknp_status rknp_child_configure(const rknp_kv *opaque,
                                          uint32_t opaque_count,
                                          const rknp_child_options *opts,
                                          char *devname, uint32_t devname_len,
                                          rknp_error **err);

/* ------------------------------------------------------------------------ */
/* Versioned entry point                                                    */
/* ------------------------------------------------------------------------ */

/**
 * Function table of ABI major 1. Append-only: a function exists when its
 * slot ends within struct_size (offsetof + sizeof <= struct_size); the
 * comment before each block names the minor that added it.
 */
typedef struct rknp_api_v1 {
    /* 1.0 */
    uint32_t struct_size;
    uint32_t abi_major;
    uint32_t abi_minor;
    uint32_t reserved0;
    rknp_status (*error_code)(const rknp_error *);
    const char *(*error_message)(const rknp_error *);
    void (*error_free)(rknp_error *);
    uint32_t (*abi_version)(void);
    const char *(*library_version)(void);
    rknp_status (*config_init)(rknp_config *, uint32_t);
    rknp_status (*parent_new)(const rknp_config *, rknp_parent **,
                              rknp_error **);
    rknp_status (*parent_start)(rknp_parent *, const char *, int32_t,
                                rknp_error **);
    rknp_status (*parent_network)(const rknp_parent *, rknp_network *,
                                  rknp_error **);
    uint32_t (*parent_opaque_count)(const rknp_parent *);
    rknp_status (*parent_opaque_get)(const rknp_parent *, uint32_t,
                                     const char **, const char **,
                                     rknp_error **);
    rknp_status (*parent_stats)(const rknp_parent *, rknp_stats *,
                                rknp_error **);
    void (*parent_close)(rknp_parent *);
    void (*parent_free)(rknp_parent *);
    rknp_status (*child_options_init)(rknp_child_options *, uint32_t);
    rknp_status (*child_configure)(const rknp_kv *, uint32_t,
                                   const rknp_child_options *, char *,
                                   uint32_t, rknp_error **);
    /* 1.1 */
    rknp_status (*forward_init)(rknp_forward *, uint32_t);
    rknp_status (*parent_add_forward)(rknp_parent *, const rknp_forward *,
                                      uint32_t *, rknp_error **);
    rknp_status (*parent_remove_forward)(rknp_parent *, uint32_t,
                                         rknp_error **);
    rknp_status (*parent_list_forwards)(const rknp_parent *,
                                        rknp_forward_info *, uint32_t,
                                        uint32_t *, rknp_error **);
} rknp_api_v1;

#define RKNP_API_V1_SIZE_1_0 \
    (offsetof(rknp_api_v1, child_configure) + sizeof(void (*)(void)))
#define RKNP_API_V1_SIZE_1_1 \
    (offsetof(rknp_api_v1, parent_list_forwards) + sizeof(void (*)(void)))

/** Name of the entry point, for dlsym. */
#define RKNP_GET_API_SYMBOL "rknp_get_api"

/** Type of the entry point. */
typedef const void *(*rknp_get_api_fn)(uint32_t abi_major);

/**
 * Returns the static, immutable function table for abi_major (cast it to
 * rknp_api_v1 for major 1), or NULL if this library does not implement that
 * major. Thread-safe.
 */
RKNP_API const void *rknp_get_api(uint32_t abi_major);

#ifdef __cplusplus
}
#endif

#endif /* RKNP_H */
