// SPDX-License-Identifier: Apache-2.0

/*
 * rknp-harness: a minimal rootlesskit stand-in written against the public
 * C ABI only. It forks a child into a new user+network namespace (or, with
 * --detach-netns, leaves the child in the current namespaces and lets the
 * library enter the given netns), runs the parent side here and the child
 * side there, then execs the command in the child and exits with its status.
 *
 * usage: rknp-harness [options] -- COMMAND [ARGS...]
 *   --mtu N  --cidr CIDR  --ifname NAME  --mac MAC  --ipv6  --ipv6-address A
 *   --disable-host-loopback  --disable-dns  --disable-offload  --outbound-addr A
 *   --outbound-addr6 A  --tcp-fast (RKNP_TCP_PATH_FAST)  --tcp-slirp (_SLIRP)
 *   --udp-fast (RKNP_UDP_PATH_FAST)  --udp-slirp (_SLIRP)
 *   --disable-sandbox
 *   --forward PROTO,HOST,HOSTPORT,GUESTPORT   e.g. tcp,127.0.0.1,8080,80
 *   --detach-netns PATH   child stays here; the tap is made in PATH
 *   --log FILE            plugin log lines (default: stderr)
 *   --max-flows N  --max-new-flows-per-sec N   (rknp_config, ABI 1.3)
 *   --stats               print counters to stderr when the command exits
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rknp.h"
#include "test_child.h"

static FILE *log_file;

static void die(const char *what, rknp_error *err) {
    fprintf(stderr, "rknp-harness: %s: %s\n", what, rknp_error_message(err));
    rknp_error_free(err);
    exit(2);
}

/* Set-up failed after rknp_parent_new: release everything, so that under
 * the asan preset LeakSanitizer does not turn exit status 2 into an abort. */
static int setup_failed(rknp_parent *p, test_child *child, const char *state_dir) {
    if (child != NULL) test_child_abandon(child);
    rknp_parent_free(p);
    if (state_dir != NULL) rmdir(state_dir);
    if (log_file != stderr) fclose(log_file);
    return 2;
}

int main(int argc, char **argv) {
    rknp_config cfg;
    rknp_config_init(&cfg, sizeof cfg);
    const char *netns = NULL;
    char *forwards[16];
    int nforwards = 0;
    int stats = 0, i;
    log_file = stderr;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--") == 0) { i++; break; }
        if (strcmp(a, "--ipv6") == 0) { cfg.enable_ipv6 = 1; continue; }
        if (strcmp(a, "--disable-host-loopback") == 0) { cfg.disable_host_loopback = 1; continue; }
        if (strcmp(a, "--disable-dns") == 0) { cfg.disable_dns = 1; continue; }
        if (strcmp(a, "--stats") == 0) { stats = 1; continue; }
        if (strcmp(a, "--disable-offload") == 0) { cfg.disable_offload = 1; continue; }
        if (strcmp(a, "--tcp-fast") == 0) { cfg.tcp_path = RKNP_TCP_PATH_FAST; continue; }
        if (strcmp(a, "--tcp-slirp") == 0) { cfg.tcp_path = RKNP_TCP_PATH_SLIRP; continue; }
        if (strcmp(a, "--udp-fast") == 0) { cfg.udp_path = RKNP_UDP_PATH_FAST; continue; }
        if (strcmp(a, "--udp-slirp") == 0) { cfg.udp_path = RKNP_UDP_PATH_SLIRP; continue; }
        if (strcmp(a, "--disable-sandbox") == 0) { cfg.disable_sandbox = 1; continue; }
        if (v == NULL) { fprintf(stderr, "rknp-harness: %s needs a value\n", a); return 2; }
        i++;
        if (strcmp(a, "--mtu") == 0) cfg.mtu = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--cidr") == 0) cfg.cidr = v;
        else if (strcmp(a, "--ifname") == 0) cfg.ifname = v;
        else if (strcmp(a, "--mac") == 0) cfg.mac_address = v;
        else if (strcmp(a, "--ipv6-address") == 0) cfg.ipv6_address = v;
        else if (strcmp(a, "--outbound-addr") == 0) cfg.outbound_addr = v;
        else if (strcmp(a, "--outbound-addr6") == 0) cfg.outbound_addr6 = v;
        else if (strcmp(a, "--detach-netns") == 0) netns = v;
        else if (strcmp(a, "--max-flows") == 0) cfg.max_flows = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--max-new-flows-per-sec") == 0)
            cfg.max_new_flows_per_sec = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--forward") == 0 && nforwards < 16) forwards[nforwards++] = argv[i];
        else if (strcmp(a, "--log") == 0) {
            log_file = fopen(v, "a");
            if (log_file == NULL) { perror(v); return 2; }
        } else { fprintf(stderr, "rknp-harness: unknown option %s\n", a); return 2; }
    }
    if (i >= argc) { fprintf(stderr, "usage: rknp-harness [options] -- COMMAND\n"); return 2; }
    cfg.log_fn = test_log_line;
    cfg.log_user_data = log_file;

    rknp_parent *parent = NULL;
    rknp_error *err = NULL;
    if (rknp_parent_new(&cfg, &parent, &err) != RKNP_OK) die("config", err);

    char state_dir[] = "/tmp/rknp-harness.XXXXXX";
    if (mkdtemp(state_dir) == NULL) {
        perror("mkdtemp");
        return setup_failed(parent, NULL, NULL);
    }
    test_child child;
    if (test_child_spawn(&child, "rknp-harness", netns, argv + i, test_log_line,
                         log_file) != 0)
        return setup_failed(parent, NULL, state_dir);
    pid_t pid = child.pid;
    if (rknp_parent_start(parent, state_dir, pid, &err) != RKNP_OK) {
        fprintf(stderr, "rknp-harness: start: %s\n", rknp_error_message(err));
        rknp_error_free(err);
        return setup_failed(parent, &child, state_dir);
    }

    for (int f = 0; f < nforwards; f++) {
        rknp_forward fw;
        rknp_forward_init(&fw, sizeof fw);
        char *proto = strtok(forwards[f], ","), *host = strtok(NULL, ",");
        char *hp = strtok(NULL, ","), *gp = strtok(NULL, ",");
        if (proto == NULL || host == NULL || hp == NULL || gp == NULL) {
            fprintf(stderr, "rknp-harness: bad --forward\n");
            return setup_failed(parent, &child, state_dir);
        }
        fw.protocol = strcmp(proto, "udp") == 0 ? RKNP_PROTO_UDP : RKNP_PROTO_TCP;
        fw.host_addr = host;
        fw.host_port = (uint32_t)strtoul(hp, NULL, 10);
        fw.guest_port = (uint32_t)strtoul(gp, NULL, 10);
        uint32_t id;
        if (rknp_parent_add_forward(parent, &fw, &id, &err) != RKNP_OK) {
            fprintf(stderr, "rknp-harness: forward: %s\n", rknp_error_message(err));
            rknp_error_free(err);
            return setup_failed(parent, &child, state_dir);
        }
    }
    if (test_child_send_opaque(&child, "rknp-harness", parent) != 0)
        return setup_failed(parent, &child, state_dir);

    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (stats) {
        rknp_stats s;
        s.struct_size = sizeof s;
        if (rknp_parent_stats(parent, &s, NULL) == RKNP_OK)
            fprintf(stderr, "stats: attached=%u from_tap=%llu to_tap=%llu dropped=%llu "
                            "refused=%llu merged=%llu superseded=%llu "
                            "flows_refused=%llu flows_rate_limited=%llu "
                            "host_sockets=%llu tcp_fast_flows=%llu "
                            "udp_fast_flows=%llu udp_fast_dropped=%llu sandbox=%u "
                            "tcp_forward_accepted=%llu tcp_forward_refused=%llu "
                            "tcp_forward_flows=%llu udp_forward_clients=%llu "
                            "udp_forward_admitted=%llu udp_forward_rate_limited=%llu "
                            "udp_forward_evicted=%llu udp_forward_full=%llu\n",
                    s.tap_attached, (unsigned long long)s.frames_from_tap,
                    (unsigned long long)s.frames_to_tap,
                    (unsigned long long)s.frames_dropped,
                    (unsigned long long)s.handovers_refused,
                    (unsigned long long)s.segments_merged,
                    (unsigned long long)s.acks_superseded,
                    (unsigned long long)s.flows_refused,
                    (unsigned long long)s.flows_rate_limited,
                    (unsigned long long)s.host_sockets,
                    (unsigned long long)s.tcp_fast_flows,
                    (unsigned long long)s.udp_fast_flows,
                    (unsigned long long)s.udp_fast_dropped, s.sandbox,
                    (unsigned long long)s.tcp_forward_accepted,
                    (unsigned long long)s.tcp_forward_refused,
                    (unsigned long long)s.tcp_forward_flows,
                    (unsigned long long)s.udp_forward_clients,
                    (unsigned long long)s.udp_forward_admitted,
                    (unsigned long long)s.udp_forward_rate_limited,
                    (unsigned long long)s.udp_forward_evicted,
                    (unsigned long long)s.udp_forward_full);
    }
    rknp_parent_close(parent);
    rknp_parent_free(parent);
    rmdir(state_dir);
    if (log_file != stderr) fclose(log_file);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}
