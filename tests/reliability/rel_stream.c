// SPDX-License-Identifier: Apache-2.0

/*
 * rknp-rel-stream: integrity traffic for the reliability tests.
 *
 *   serve ADDR PORT [--reset-after BYTES] [--ready-file F]
 *   client ADDR PORT [--conns N] [--up BYTES] [--down BYTES] [--seed S]
 *          [--expect-reset] [--timeout SEC] [--progress-file F]
 *
 * Every connection carries two pseudo-random streams derived from a per-
 * connection seed: the upload (client -> server) and the download (server
 * -> client). Receivers regenerate the expected bytes and compare every
 * byte, and both sides hash what they sent and received; the server
 * returns its hash of the upload in a trailer after the download, the
 * client checks it. So a lost, duplicated, reordered or corrupted byte in
 * either direction fails the connection, and the offset is reported.
 * The client opens all connections before sending, so N are open at once.
 * --reset-after makes the server abort (RST) each connection after that
 * many upload bytes; --expect-reset makes the client require that.
 * Single-threaded, poll-based; exits 0 only if every connection passed.
 * Every return path frees and closes what it opened: the asan preset runs
 * this under LeakSanitizer, which turns a leak into a failed exit status.
 * Here: the client and main; the server is rel_stream_server.c, the
 * streams, hash and socket helpers rel_stream_conn.c (rel_stream.h).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rel_stream.h"

/* ---- client ------------------------------------------------------------------ */

static void client_step(conn *c, short rev) {
    if (c->state == ST_CONNECTING && (rev & (POLLOUT | POLLERR | POLLHUP))) {
        int e = 0;
        socklen_t l = sizeof e;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &l);
        if (e != 0) { c->err = e; c->state = ST_FAILED; return; }
        c->state = ST_HEADER; /* established; the header goes out in ST_RUN */
        return;
    }
    if (c->state != ST_RUN && c->state != ST_TRAILER) return;
    if (c->state == ST_RUN) {
        if (c->hdr_got < sizeof c->hdr) {
            ssize_t n = send(c->fd, (char *)&c->hdr + c->hdr_got, sizeof c->hdr - c->hdr_got, MSG_NOSIGNAL);
            if (n < 0 && errno != EAGAIN) { c->err = errno; c->state = ST_FAILED; return; }
            if (n > 0) c->hdr_got += (size_t)n;
            if (c->hdr_got < sizeof c->hdr) return;
        }
        if ((rev & POLLOUT) && c->sent < c->hdr.up_len &&
            send_payload(c, up_seed(c->hdr.seed), c->hdr.up_len) < 0) { c->err = errno; c->state = ST_FAILED; return; }
        if ((rev & (POLLIN | POLLHUP)) && c->recvd < c->hdr.down_len &&
            recv_payload(c, down_seed(c->hdr.seed), c->hdr.down_len) < 0) { c->err = errno; c->state = ST_FAILED; return; }
        if (c->sent == c->hdr.up_len && c->recvd == c->hdr.down_len) c->state = ST_TRAILER;
        else return;
    }
    if (c->state == ST_TRAILER && (rev & (POLLIN | POLLHUP))) {
        ssize_t n = recv(c->fd, c->tail + c->tail_n, sizeof c->tail - c->tail_n, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN)) { c->err = n == 0 ? EPIPE : errno; c->state = ST_FAILED; return; }
        if (n > 0) c->tail_n += (size_t)n;
        if (c->tail_n == sizeof c->tail) {
            trailer t;
            memcpy(&t, c->tail, sizeof t);
            int ok = t.bad_offset == UINT64_MAX && t.upload_hash == hash_final(&c->hs) &&
                     c->bad_offset == UINT64_MAX;
            if (!ok)
                fprintf(stderr, "client: conn %d corrupt: upload %s (server bad offset %lld), "
                        "download first bad byte %lld\n", c->id,
                        t.upload_hash == hash_final(&c->hs) ? "hash ok" : "hash differs",
                        (long long)t.bad_offset, (long long)c->bad_offset);
            c->err = ok ? 0 : EBADMSG;
            c->state = ok ? ST_DONE : ST_FAILED;
        }
    }
}

static int client(int argc, char **argv) {
    if (argc < 2) return 2;
    long conns = 1, timeout = 120;
    uint64_t up = 1 << 20, down = 1 << 20, seed = 1;
    int expect_reset = 0;
    const char *progress = NULL;
    for (int i = 2; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "0";
        if (!strcmp(argv[i], "--expect-reset")) { expect_reset = 1; continue; }
        if (!strcmp(argv[i], "--conns")) conns = atol(v);
        else if (!strcmp(argv[i], "--up")) up = strtoull(v, NULL, 0);
        else if (!strcmp(argv[i], "--down")) down = strtoull(v, NULL, 0);
        else if (!strcmp(argv[i], "--seed")) seed = strtoull(v, NULL, 0);
        else if (!strcmp(argv[i], "--timeout")) timeout = atol(v);
        else if (!strcmp(argv[i], "--progress-file")) progress = v;
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
        i++;
    }
    struct sockaddr_storage ss;
    socklen_t sl;
    int fam = make_addr(argv[0], atoi(argv[1]), &ss, &sl);
    if (conns < 1) { fprintf(stderr, "client: --conns must be at least 1\n"); return 2; }
    conn *cs = calloc((size_t)conns, sizeof *cs);
    struct pollfd *pf = calloc((size_t)conns, sizeof *pf);
    if (cs == NULL || pf == NULL) die("calloc");
    for (long i = 0; i < conns; i++) {
        conn *c = &cs[i];
        c->id = (int)i;
        c->bad_offset = UINT64_MAX;
        c->hdr = (header){MAGIC, 0, seed * 100000 + (uint64_t)i, up, down};
        c->fd = socket(fam, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c->fd < 0) die("socket");
        if (connect(c->fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) die("connect");
    }
    double t0 = now_s(), deadline = t0 + (double)timeout;
    long established = 0, ended = 0;
    int started = 0, rc = -1;
    while (ended < conns) {
        for (long i = 0; i < conns; i++) {
            conn *c = &cs[i];
            short ev = 0;
            if (c->state == ST_CONNECTING) ev = POLLOUT;
            else if (c->state == ST_RUN) ev = POLLIN | (c->sent < up || c->hdr_got < sizeof c->hdr ? POLLOUT : 0);
            else if (c->state == ST_TRAILER) ev = POLLIN;
            pf[i] = (struct pollfd){ev ? c->fd : -1, ev, 0};
        }
        if (now_s() > deadline) {
            fprintf(stderr, "client: timeout after %lds: %ld established, %ld ended\n", timeout, established, ended);
            rc = 3;
            break;
        }
        if (poll(pf, (nfds_t)conns, 200) < 0 && errno != EINTR) die("poll");
        for (long i = 0; i < conns; i++) {
            int before = cs[i].state;
            if (pf[i].revents) client_step(&cs[i], pf[i].revents);
            if (before == ST_CONNECTING && cs[i].state == ST_HEADER) established++;
            if (before != cs[i].state && (cs[i].state == ST_DONE || cs[i].state == ST_FAILED)) {
                ended++;
                close(cs[i].fd);
            }
        }
        /* All connections open at once before any data moves. */
        if (!started && established + ended == conns) {
            started = 1;
            fprintf(stderr, "client: %ld connections established concurrently\n", established);
            for (long i = 0; i < conns; i++)
                if (cs[i].state == ST_HEADER) cs[i].state = ST_RUN;
        }
        if (progress && started) {
            uint64_t total = 0;
            for (long i = 0; i < conns; i++) total += cs[i].sent + cs[i].recvd;
            if (total > 0) { FILE *f = fopen(progress, "w"); if (f) { fprintf(f, "%llu\n", (unsigned long long)total); fclose(f); } progress = NULL; }
        }
    }
    long ok = 0, resets = 0, corrupt = 0;
    uint64_t bytes = 0;
    for (long i = 0; i < conns; i++) {
        bytes += cs[i].sent + cs[i].recvd;
        if (cs[i].state == ST_DONE) ok++;
        if (cs[i].err == ECONNRESET || cs[i].err == EPIPE) resets++;
        if (cs[i].err == EBADMSG || cs[i].bad_offset != UINT64_MAX) corrupt++;
        /* Connections that had not ended (timeout) still hold their fd. */
        if (cs[i].state != ST_DONE && cs[i].state != ST_FAILED) close(cs[i].fd);
    }
    free(cs);
    free(pf);
    if (rc >= 0) return rc;
    double dt = now_s() - t0;
    fprintf(stderr, "client: %ld/%ld verified, %ld reset, %ld corrupt, %.1f MB in %.1fs (%.0f MB/s)\n",
            ok, conns, resets, corrupt, (double)bytes / 1e6, dt, (double)bytes / 1e6 / dt);
    if (corrupt > 0) return 1;
    if (expect_reset) return resets == conns ? 0 : 1;
    return ok == conns && established == conns ? 0 : 1;
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_DFL); /* a stray SIGPIPE must be seen, not hidden */
    if (argc >= 2 && !strcmp(argv[1], "serve")) return serve(argc - 2, argv + 2);
    if (argc >= 2 && !strcmp(argv[1], "client")) return client(argc - 2, argv + 2);
    fprintf(stderr, "usage: rknp-rel-stream serve|client ADDR PORT [options]\n");
    return 2;
}
