// SPDX-License-Identifier: Apache-2.0

/*
 * rknp-rel-driver: the parent side of rootlesskit on the public ABI, with
 * fault injection and leak checks for the reliability tests. Like
 * rknp-harness it runs COMMAND as root of a new user+net namespace whose
 * network the plugin provides; in addition it
 *   - records this process's open fds and threads before rknp_parent_new
 *     and requires exactly those after rknp_parent_close + _free (no stack
 *     thread, socket, eventfd or tap fd left);
 *   - after a normal exit of COMMAND, requires the fds to return to the
 *     set right after the tap was attached (no host socket left open by
 *     finished connections) within --settle-ms;
 *   - --kill-child-after BYTES: SIGKILLs COMMAND once that many bytes
 *     crossed the stack; --close-after BYTES: closes the parent instead,
 *     with COMMAND's connections still active;
 *   - --hold FILE: prints the hand-over socket path and waits for FILE to
 *     exist before letting the child hand over (foreign peers go first);
 *   - --expect-refused N: requires N refused hand-overs in the stats;
 *   - --tcp-peek offset|discard: forces rknp_config.tcp_peek_mode and
 *     requires rknp_stats.tcp_peek_mode to say so once the tap is attached
 *     (with the fast path and no --tcp-peek: either, never 0).
 * SIGPIPE keeps its default action: libslirp writing to a reset socket
 * must not kill the host process.
 * Exit: 0 when every check passed, 1 otherwise, 2 on usage/setup errors.
 *
 * usage: rknp-rel-driver [--log FILE] [--kill-child-after N]
 *        [--close-after N] [--settle-ms MS] [--hold FILE]
 *        [--expect-refused N] [--expect-exit CODE|killed|any]
 *        [--child-timeout SEC] [--tcp-path fast|slirp]
 *        [--tcp-peek offset|discard] -- COMMAND [ARGS...]
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rknp.h"
#include "test_child.h"

static FILE *log_file;
static int failures;

static void fail(const char *fmt, const char *detail) {
    fprintf(stderr, "rknp-rel-driver: FAIL ");
    fprintf(stderr, fmt, detail);
    fprintf(stderr, "\n");
    failures++;
}

static void check(rknp_status st, rknp_error *err, const char *what) {
    if (st == RKNP_OK) return;
    fprintf(stderr, "rknp-rel-driver: %s: %s\n", what, rknp_error_message(err));
    rknp_error_free(err);
    exit(2);
}

/* Setup failed after rknp_parent_new: release everything (the asan preset
 * runs this under LeakSanitizer, so a leak would hide the real error). */
static int setup_failed(rknp_parent *p, char *before, const char *state_dir) {
    rknp_parent_free(p);
    if (state_dir != NULL) rmdir(state_dir);
    free(before);
    if (log_file != stderr) fclose(log_file);
    return 2;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* "fd -> target" lines of /proc/self/fd, excluding the directory's own fd. */
static char *fd_snapshot(void) {
    size_t cap = 4096, len = 0;
    char *out = malloc(cap);
    DIR *d = opendir("/proc/self/fd");
    if (out == NULL || d == NULL) exit(2);
    out[0] = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d)) continue;
        char path[300], target[256] = "";
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n > 0) target[n] = 0;
        if (len + strlen(e->d_name) + strlen(target) + 8 > cap) out = realloc(out, cap *= 2);
        len += (size_t)sprintf(out + len, "%s -> %s\n", e->d_name, target);
    }
    closedir(d);
    return out;
}

static int fd_count(const char *snap) {
    int n = 0;
    for (; *snap; snap++) n += *snap == '\n';
    return n;
}

/* Lines of now that are not in base, or "" if none. */
static char *extra_lines(const char *now, const char *base) {
    char *out = calloc(1, strlen(now) + 1), *o = out;
    for (const char *l = now; *l;) {
        const char *e = strchr(l, '\n');
        size_t n = (size_t)(e - l) + 1;
        int found = 0;
        for (const char *b = base; *b && !found;) {
            const char *be = strchr(b, '\n');
            found = (size_t)(be - b) + 1 == n && memcmp(b, l, n) == 0;
            b = be + 1;
        }
        if (!found) { memcpy(o, l, n); o += n; }
        l = e + 1;
    }
    return out;
}

/* How many times needle occurs in hay. */
static int occurrences(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* A running parent with its tap holds exactly the tap, its eventfd, the
 * log queue's (this driver registers a log callback) and the stack loop's
 * one epoll set, which every path shares; with the TCP fast path also the
 * fast path's wake-up eventfd. Nothing per connection. */
static int fast_path = 0;
/* The library's fixed fds: the tap, its eventfds, and two epoll sets (the
 * stack loop's, and libslirp's sockets' nested in it: slirp/poll_set). */
static int only_tap_and_eventfd(const char *extra) {
    int eventfds = fast_path ? 3 : 2;
    return fd_count(extra) == 1 + eventfds + 2 &&
           occurrences(extra, "-> /dev/net/tun\n") == 1 &&
           occurrences(extra, "-> anon_inode:[eventfd]\n") == eventfds &&
           occurrences(extra, "-> anon_inode:[eventpoll]\n") == 2;
}

static int thread_count(void) {
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    if (d == NULL) exit(2);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static uint64_t traffic(rknp_parent *p, rknp_stats *s) {
    s->struct_size = sizeof *s;
    if (rknp_parent_stats(p, s, NULL) != RKNP_OK) return 0;
    return s->bytes_from_tap + s->bytes_to_tap;
}

int main(int argc, char **argv) {
    unsigned long long kill_after = 0, close_after = 0;
    int settle_ms = 15000, child_timeout = 120, expect_refused = -1, i;
    const char *hold = NULL, *expect_exit = "0";
    uint8_t peek_mode = RKNP_TCP_PEEK_AUTO;
    log_file = stderr;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--")) { i++; break; }
        if (v == NULL) { fprintf(stderr, "%s needs a value\n", a); return 2; }
        i++;
        if (!strcmp(a, "--kill-child-after")) kill_after = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--close-after")) close_after = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--settle-ms")) settle_ms = atoi(v);
        else if (!strcmp(a, "--child-timeout")) child_timeout = atoi(v);
        else if (!strcmp(a, "--hold")) hold = v;
        else if (!strcmp(a, "--expect-refused")) expect_refused = atoi(v);
        else if (!strcmp(a, "--expect-exit")) expect_exit = v;
        else if (!strcmp(a, "--tcp-path")) {
            if (strcmp(v, "fast") && strcmp(v, "slirp")) { fprintf(stderr, "--tcp-path fast|slirp\n"); return 2; }
            fast_path = !strcmp(v, "fast");
        }
        else if (!strcmp(a, "--tcp-peek")) {
            if (strcmp(v, "offset") && strcmp(v, "discard")) { fprintf(stderr, "--tcp-peek offset|discard\n"); return 2; }
            peek_mode = !strcmp(v, "offset") ? RKNP_TCP_PEEK_OFFSET : RKNP_TCP_PEEK_DISCARD;
        }
        else if (!strcmp(a, "--log")) {
            if ((log_file = fopen(v, "a")) == NULL) { perror(v); return 2; }
        } else { fprintf(stderr, "unknown option %s\n", a); return 2; }
    }
    if (i >= argc) { fprintf(stderr, "usage: rknp-rel-driver [options] -- COMMAND\n"); return 2; }

    /* Whatever the caller ignored: a SIGPIPE raised inside the library
     * must kill this process, so the test sees it. */
    signal(SIGPIPE, SIG_DFL);
    /* Baseline before the library allocates anything. log_file stays open. */
    char *before = fd_snapshot();
    int threads_before = thread_count();
    rknp_config cfg;
    rknp_config_init(&cfg, sizeof cfg);
    cfg.log_fn = test_log_line;
    cfg.log_user_data = log_file;
    cfg.tcp_path = fast_path ? RKNP_TCP_PATH_FAST : RKNP_TCP_PATH_SLIRP;
    cfg.tcp_peek_mode = peek_mode;
    rknp_parent *parent = NULL;
    rknp_error *err = NULL;
    check(rknp_parent_new(&cfg, &parent, &err), err, "config");

    /* Under $TMPDIR when set: a suite gives each run its own, so two runs
     * on one machine never see each other's state directories. */
    const char *tmp = getenv("TMPDIR");
    char state_dir[256];
    int len = snprintf(state_dir, sizeof state_dir, "%s/rknp-rel.XXXXXX",
                       tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
    if (len < 0 || (size_t)len >= sizeof state_dir || mkdtemp(state_dir) == NULL)
        return setup_failed(parent, before, NULL);
    test_child child;
    if (test_child_spawn(&child, "rknp-rel-driver", NULL, argv + i, test_log_line,
                         log_file) != 0)
        return setup_failed(parent, before, state_dir);
    pid_t pid = child.pid;
    if (rknp_parent_start(parent, state_dir, pid, &err) != RKNP_OK) {
        fprintf(stderr, "rknp-rel-driver: start: %s\n", rknp_error_message(err));
        rknp_error_free(err);
        test_child_abandon(&child);
        return setup_failed(parent, before, state_dir);
    }
    if (hold != NULL) {
        printf("socket %s/rknp.sock\n", state_dir);
        fflush(stdout);
        while (access(hold, F_OK) != 0) sleep_ms(20);
    }
    if (test_child_send_opaque(&child, "rknp-rel-driver", parent) != 0) {
        test_child_abandon(&child);
        return setup_failed(parent, before, state_dir);
    }

    rknp_stats st;
    double t0 = now_s();
    while (traffic(parent, &st), !st.tap_attached && now_s() - t0 < 15) sleep_ms(5);
    if (!st.tap_attached) fail("%s", "the tap was never attached");
    fprintf(stderr, "rknp-rel-driver: tcp_peek_mode %u\n", (unsigned)st.tcp_peek_mode);
    if (!fast_path && st.tcp_peek_mode != 0)
        fail("%s", "stats.tcp_peek_mode set without the fast path");
    else if (fast_path && peek_mode != RKNP_TCP_PEEK_AUTO && st.tcp_peek_mode != peek_mode)
        fail("%s", "stats.tcp_peek_mode is not the mode asked for");
    else if (fast_path && st.tcp_peek_mode != RKNP_TCP_PEEK_OFFSET &&
             st.tcp_peek_mode != RKNP_TCP_PEEK_DISCARD)
        fail("%s", "stats.tcp_peek_mode is neither offset nor discard");
    char *attached = fd_snapshot();

    /* Wait for the command, injecting the fault once the traffic is there. */
    int status = 0, exited = 0, closed = 0, killed = 0;
    while (!exited) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) { exited = 1; break; }
        uint64_t bytes = traffic(parent, &st);
        if (kill_after && !killed && bytes >= kill_after) {
            fprintf(stderr, "rknp-rel-driver: killing the child after %llu bytes\n",
                    (unsigned long long)bytes);
            kill(pid, SIGKILL);
            killed = 1;
        }
        if (close_after && !closed && bytes >= close_after) {
            fprintf(stderr, "rknp-rel-driver: closing the parent after %llu bytes\n",
                    (unsigned long long)bytes);
            rknp_parent_close(parent);
            closed = 1;
        }
        if (now_s() - t0 > child_timeout) {
            fail("%s", "the command did not finish in time; killing it");
            kill(pid, SIGKILL);
            killed = 1;
            child_timeout += 30;
        }
        sleep_ms(10);
    }
    traffic(parent, &st);
    fprintf(stderr, "rknp-rel-driver: stats from_tap=%llu/%lluB to_tap=%llu/%lluB dropped=%llu refused=%llu\n",
            (unsigned long long)st.frames_from_tap, (unsigned long long)st.bytes_from_tap,
            (unsigned long long)st.frames_to_tap, (unsigned long long)st.bytes_to_tap,
            (unsigned long long)st.frames_dropped, (unsigned long long)st.handovers_refused);
    char got[32];
    if (WIFEXITED(status)) snprintf(got, sizeof got, "%d", WEXITSTATUS(status));
    else snprintf(got, sizeof got, "killed");
    fprintf(stderr, "rknp-rel-driver: command exit %s\n", got);
    /* This process's CPU so far, the stack thread's nearly all of it
     * (tests/bench/peek_modes.sh divides it by the bytes moved). */
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        fprintf(stderr, "rknp-rel-driver: cpu %.3f s\n",
                ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
                    (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
    if (strcmp(expect_exit, "any") != 0 && strcmp(expect_exit, got) != 0)
        fail("command exit status %s is unexpected", got);
    if (expect_refused >= 0 && st.handovers_refused != (uint64_t)expect_refused)
        fail("%s", "wrong number of refused hand-overs");

    /* Finished connections must not leave host sockets behind. */
    if (!closed && !killed) {
        char *extra = extra_lines(attached, before);
        double t1 = now_s();
        while (!only_tap_and_eventfd(extra) && (now_s() - t1) * 1000 < settle_ms) {
            free(extra);
            sleep_ms(50);
            char *now = fd_snapshot();
            extra = extra_lines(now, before);
            free(now);
        }
        if (!only_tap_and_eventfd(extra)) {
            fprintf(stderr, "fds of the library (want the tap, the eventfds and two epoll sets):\n%s", extra);
            fail("%s", "fd growth after the connections finished");
        } else {
            fprintf(stderr, "rknp-rel-driver: library fds back to tap + eventfds after %.1fs\n",
                    now_s() - t1);
        }
        free(extra);
    }
    rknp_parent_close(parent);
    rknp_parent_free(parent);
    rmdir(state_dir);
    char *after = fd_snapshot();
    /* A joined thread can still be listed for a moment: pthread_join
     * returns when the kernel clears its tid, a little before the task
     * leaves /proc/self/task (seen under qemu TCG, tests/vm). */
    int threads_after = thread_count();
    for (int tries = 0; threads_after != threads_before && tries < 200; tries++) {
        sleep_ms(10);
        threads_after = thread_count();
    }
    if (threads_after != threads_before) {
        char n[16];
        snprintf(n, sizeof n, "%d", threads_after);
        fail("%s threads left after close (want the caller's only)", n);
    }
    if (strcmp(before, after) != 0) {
        fprintf(stderr, "fds before new:\n%sfds after free:\n%s", before, after);
        fail("%s", "fds left after close");
    }
    if (failures == 0) fprintf(stderr, "rknp-rel-driver: clean: %d thread(s), %d fd(s) as before\n",
                               threads_after, fd_count(after));
    free(before);
    free(after);
    free(attached);
    if (log_file != stderr) fclose(log_file);
    return failures ? 1 : 0;
}
