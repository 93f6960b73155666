// SPDX-License-Identifier: Apache-2.0

/*
 * rknp-rel-stream serve: accepts connections, checks each upload against
 * its stream, sends the download and a trailer with the upload's hash
 * (rel_stream.c describes the protocol and options).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rel_stream.h"

static volatile sig_atomic_t stop;
static int half_close;

static void on_stop(int sig) { (void)sig; stop = 1; }

/* ---- server ----------------------------------------------------------------- */

static void server_step(conn *c, short rev, uint64_t reset_after) {
    if (c->state == ST_HEADER && (rev & POLLIN)) {
        ssize_t n = recv(c->fd, (char *)&c->hdr + c->hdr_got, sizeof c->hdr - c->hdr_got, 0);
        if (n <= 0) { if (n == 0 || (errno != EAGAIN && errno != EINTR)) c->state = ST_FAILED; return; }
        c->hdr_got += (size_t)n;
        if (c->hdr_got < sizeof c->hdr) return;
        if (c->hdr.magic != MAGIC) { c->state = ST_FAILED; return; }
        c->state = ST_RUN;
    }
    if (c->state == ST_RUN) {
        if ((rev & POLLIN) && c->recvd < c->hdr.up_len &&
            recv_payload(c, up_seed(c->hdr.seed), c->hdr.up_len) < 0) { c->state = ST_FAILED; return; }
        if (reset_after > 0 && c->recvd >= reset_after) {
            /* Abort with RST, or (--half-close) stop reading and send FIN:
             * the guest's data then hits a closed socket, so libslirp's
             * next writes fail with ECONNRESET and then EPIPE. */
            if (half_close) {
                shutdown(c->fd, SHUT_WR);
                c->state = ST_DONE;
                return;
            }
            struct linger l = {1, 0};
            setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
            c->state = ST_FAILED;
            return;
        }
        if ((rev & POLLOUT) && c->sent < c->hdr.down_len &&
            send_payload(c, down_seed(c->hdr.seed), c->hdr.down_len) < 0) { c->state = ST_FAILED; return; }
        if (c->recvd == c->hdr.up_len && c->sent == c->hdr.down_len) {
            trailer t = {hash_final(&c->hr), c->bad_offset};
            memcpy(c->tail, &t, sizeof t);
            c->state = ST_TRAILER;
            if (c->bad_offset != UINT64_MAX)
                fprintf(stderr, "server: upload of seed %llu differs at byte %llu\n",
                        (unsigned long long)c->hdr.seed, (unsigned long long)c->bad_offset);
        }
    }
    if (c->state == ST_TRAILER && c->tail_n < sizeof c->tail) {
        ssize_t n = send(c->fd, c->tail + c->tail_n, sizeof c->tail - c->tail_n, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EINTR) { c->state = ST_FAILED; return; }
        if (n > 0) c->tail_n += (size_t)n;
    }
    if (c->state == ST_TRAILER && c->tail_n == sizeof c->tail && (rev & (POLLIN | POLLHUP))) {
        char b;
        ssize_t n = recv(c->fd, &b, 1, 0); /* the client closes first */
        if (n == 0 || (n < 0 && errno != EAGAIN)) c->state = ST_DONE;
    }
}

int serve(int argc, char **argv) {
    if (argc < 2) return 2;
    uint64_t reset_after = 0;
    const char *ready = NULL;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--reset-after")) reset_after = strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--ready-file")) ready = argv[i + 1];
        else if (!strcmp(argv[i], "--half-close")) half_close = atoi(argv[i + 1]);
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    struct sockaddr_storage ss;
    socklen_t sl;
    int fam = make_addr(argv[0], atoi(argv[1]), &ss, &sl);
    int ls = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (ls < 0) die("socket");
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(ls, (struct sockaddr *)&ss, sl) < 0) die("bind");
    if (listen(ls, 4096) < 0) die("listen");
    set_nonblock(ls);
    if (ready) { FILE *f = fopen(ready, "w"); if (f) fclose(f); }
    signal(SIGTERM, on_stop);
    signal(SIGINT, on_stop);
    size_t cap = 64, n = 0;
    conn *cs = calloc(cap, sizeof *cs);
    struct pollfd *pf = calloc(cap + 1, sizeof *pf);
    if (cs == NULL || pf == NULL) die("calloc");
    unsigned long done = 0, failed = 0, maxopen = 0;
    while (!stop) {
        pf[0] = (struct pollfd){ls, POLLIN, 0};
        for (size_t i = 0; i < n; i++) {
            short ev = POLLIN;
            if ((cs[i].state == ST_RUN && cs[i].sent < cs[i].hdr.down_len) ||
                (cs[i].state == ST_TRAILER && cs[i].tail_n < sizeof cs[i].tail))
                ev |= POLLOUT;
            pf[i + 1] = (struct pollfd){cs[i].fd, ev, 0};
        }
        if (poll(pf, n + 1, 500) < 0 && errno != EINTR) die("poll");
        for (size_t i = 0; i < n; i++) {
            if (pf[i + 1].revents) server_step(&cs[i], pf[i + 1].revents, reset_after);
            if (pf[i + 1].revents & (POLLERR | POLLNVAL)) cs[i].state = cs[i].state == ST_DONE ? ST_DONE : ST_FAILED;
        }
        for (size_t i = 0; i < n;) {
            if (cs[i].state == ST_DONE || cs[i].state == ST_FAILED) {
                if (cs[i].state == ST_DONE) done++; else failed++;
                close(cs[i].fd);
                cs[i] = cs[--n];
            } else {
                i++;
            }
        }
        if (pf[0].revents & POLLIN) {
            for (;;) {
                int fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0) break;
                if (n == cap) {
                    cap *= 2;
                    cs = realloc(cs, cap * sizeof *cs);
                    pf = realloc(pf, (cap + 1) * sizeof *pf);
                    if (cs == NULL || pf == NULL) die("realloc");
                }
                memset(&cs[n], 0, sizeof cs[n]);
                cs[n].fd = fd;
                cs[n].state = ST_HEADER;
                cs[n].bad_offset = UINT64_MAX;
                n++;
                if (n > maxopen) maxopen = n;
            }
        }
    }
    fprintf(stderr, "server: %lu done, %lu aborted, %lu open at most\n", done, failed, maxopen);
    for (size_t i = 0; i < n; i++) close(cs[i].fd);
    close(ls);
    free(cs);
    free(pf);
    return 0;
}

