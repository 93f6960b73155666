// SPDX-License-Identifier: Apache-2.0

#define _GNU_SOURCE
#include "test_child.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void test_log_line(void *user, int32_t level, const char *msg) {
    static const char *names[] = {"error", "warn", "info", "debug"};
    FILE *out = user;
    fprintf(out, "rknp %s: %s\n", level >= 0 && level <= 3 ? names[level] : "?", msg);
    fflush(out);
}

/* The child side's log callback must run on the thread that called
 * rknp_child_configure, in its network namespace, also when the library
 * enters a detached netns: a runtime may clone a thread of its own from
 * inside a callback (Go does), and that thread would be in the detached
 * netns. The child process counts the calls that were not. */
static struct {
    rknp_log_fn fn;
    void *user;
    pid_t tid;
    ino_t netns;
    int strays;
} child_log;

static ino_t thread_netns(void) {
    struct stat st;
    return stat("/proc/thread-self/ns/net", &st) == 0 ? st.st_ino : 0;
}

static void checked_log(void *user, int32_t level, const char *msg) {
    (void)user;
    if (gettid() != child_log.tid || thread_netns() != child_log.netns) child_log.strays++;
    if (child_log.fn != NULL) child_log.fn(child_log.user, level, msg);
}

static int read_full(int fd, void *buf, size_t len) {
    char *p = buf;
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int write_full(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void child_fail(const char *prog, const char *what, const char *detail) {
    fprintf(stderr, "%s: child: %s: %s\n", prog, what, detail);
    _exit(3);
}

static void write_file(const char *prog, const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        child_fail(prog, path, strerror(errno));
    close(fd);
}

static void enter_user_and_net_ns(const char *prog) {
    char map[64];
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
        child_fail(prog, "unshare", strerror(errno));
    write_file(prog, "/proc/self/setgroups", "deny");
    snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
    write_file(prog, "/proc/self/uid_map", map);
    snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
    write_file(prog, "/proc/self/gid_map", map);
}

/* The values arrive as: count (u32), length (u32), then count pairs of
 * NUL-terminated key and value. */
static void run_child(int from_parent, int to_parent, const char *prog,
                      const char *netns, char **argv, rknp_log_fn log,
                      void *log_user) {
    /* Die with the caller: no orphaned command keeps the netns alive. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1) _exit(3);
    if (netns == NULL) enter_user_and_net_ns(prog);
    if (write(to_parent, "R", 1) != 1) child_fail(prog, "pipe", strerror(errno));

    uint32_t count = 0, len = 0;
    if (read_full(from_parent, &count, sizeof count) ||
        read_full(from_parent, &len, sizeof len))
        child_fail(prog, "pipe", "closed before the opaque values");
    char *blob = malloc((size_t)len + 1);
    rknp_kv *kv = calloc((size_t)count + 1, sizeof *kv);
    if (blob == NULL || kv == NULL) child_fail(prog, "malloc", strerror(errno));
    if (read_full(from_parent, blob, len))
        child_fail(prog, "pipe", "opaque values cut short");
    blob[len] = '\0';
    char *p = blob, *end = blob + len;
    for (uint32_t i = 0; i < count; i++) {
        if (p >= end) child_fail(prog, "pipe", "fewer opaque values than announced");
        kv[i].key = p;
        p += strlen(p) + 1;
        kv[i].value = p;
        p += strlen(p) + 1;
    }

    rknp_child_options opts;
    rknp_child_options_init(&opts, sizeof opts);
    opts.detached_netns_path = netns;
    child_log.fn = log;
    child_log.user = log_user;
    child_log.tid = gettid();
    child_log.netns = thread_netns();
    opts.log_fn = checked_log;
    rknp_error *err = NULL;
    if (rknp_child_configure(kv, count, &opts, NULL, 0, &err) != RKNP_OK)
        child_fail(prog, "child side", rknp_error_message(err));
    if (child_log.strays > 0)
        child_fail(prog, "child side", "the log callback ran on another thread or in "
                                       "another network namespace");
    free(blob);
    free(kv);
    execvp(argv[0], argv);
    fprintf(stderr, "%s: exec %s: %s\n", prog, argv[0], strerror(errno));
    _exit(127);
}

int test_child_spawn(test_child *c, const char *prog, const char *netns,
                     char **argv, rknp_log_fn log, void *log_user) {
    int down[2] = {-1, -1}, up[2] = {-1, -1};
    if (pipe2(down, O_CLOEXEC) < 0 || pipe2(up, O_CLOEXEC) < 0 ||
        (c->pid = fork()) < 0) {
        fprintf(stderr, "%s: spawning the child: %s\n", prog, strerror(errno));
        for (int i = 0; i < 2; i++) {
            if (down[i] >= 0) close(down[i]);
            if (up[i] >= 0) close(up[i]);
        }
        return -1;
    }
    if (c->pid == 0) run_child(down[0], up[1], prog, netns, argv, log, log_user);
    close(down[0]);
    close(up[1]);
    c->opaque_fd = down[1];
    char ready;
    ssize_t n = read(up[0], &ready, 1);
    close(up[0]);
    if (n != 1) {
        fprintf(stderr, "%s: the child died while setting up its namespaces\n", prog);
        test_child_abandon(c);
        return -1;
    }
    return 0;
}

void test_child_abandon(test_child *c) {
    if (c->opaque_fd >= 0) close(c->opaque_fd);
    c->opaque_fd = -1;
    kill(c->pid, SIGKILL);
    while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR) {}
}

int test_child_send_opaque(test_child *c, const char *prog, const rknp_parent *p) {
    uint32_t count = rknp_parent_opaque_count(p), len = 0;
    char *blob = NULL;
    int rc = 0;
    for (uint32_t k = 0; k < count && rc == 0; k++) {
        const char *key, *value;
        rknp_error *err = NULL;
        if (rknp_parent_opaque_get(p, k, &key, &value, &err) != RKNP_OK) {
            fprintf(stderr, "%s: opaque value %u: %s\n", prog, k, rknp_error_message(err));
            rknp_error_free(err);
            rc = -1;
            break;
        }
        size_t kl = strlen(key) + 1, vl = strlen(value) + 1;
        char *grown = realloc(blob, len + kl + vl);
        if (grown == NULL) { rc = -1; break; }
        blob = grown;
        memcpy(blob + len, key, kl);
        memcpy(blob + len + kl, value, vl);
        len += (uint32_t)(kl + vl);
    }
    if (rc == 0 && (write_full(c->opaque_fd, &count, sizeof count) ||
                    write_full(c->opaque_fd, &len, sizeof len) ||
                    write_full(c->opaque_fd, blob, len))) {
        fprintf(stderr, "%s: sending the opaque values: %s\n", prog, strerror(errno));
        rc = -1;
    }
    free(blob);
    close(c->opaque_fd);
    c->opaque_fd = -1;
    return rc;
}
