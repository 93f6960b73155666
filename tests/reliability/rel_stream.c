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

#define MAGIC 0x5453524bu /* "KRST" little-endian */
#define CHUNK 65536

/* ---- deterministic streams and hashing ---------------------------------- */

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Bytes [off, off+len) of stream seed: byte k is byte k%8 of word k/8. */
static void stream_fill(uint64_t seed, uint64_t off, uint8_t *buf, size_t len) {
    while (len > 0) {
        uint64_t w = mix64(seed + (off / 8) * 0x9e3779b97f4a7c15ull);
        size_t skip = off % 8, n = 8 - skip;
        if (n > len) n = len;
        memcpy(buf, (uint8_t *)&w + skip, n);
        buf += n;
        off += n;
        len -= n;
    }
}

typedef struct { uint64_t h, count; uint8_t pend[8]; size_t npend; } hasher;

static void hash_word(hasher *s, uint64_t w) {
    s->h = (s->h ^ w) * 0x100000001b3ull;
    s->h ^= s->h >> 29;
}
static void hash_feed(hasher *s, const uint8_t *p, size_t len) {
    s->count += len;
    while (len > 0 && (s->npend > 0 || len < 8)) {
        s->pend[s->npend++] = *p++;
        len--;
        if (s->npend == 8) {
            uint64_t w;
            memcpy(&w, s->pend, 8);
            hash_word(s, w);
            s->npend = 0;
        }
    }
    for (; len >= 8; p += 8, len -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        hash_word(s, w);
    }
    while (len-- > 0) s->pend[s->npend++] = *p++;
}
static uint64_t hash_final(const hasher *s) {
    hasher t = *s;
    uint64_t w = 0;
    memcpy(&w, t.pend, t.npend);
    hash_word(&t, w ^ (uint64_t)t.npend << 56);
    hash_word(&t, t.count);
    return t.h;
}

static uint64_t up_seed(uint64_t seed) { return seed * 2 + 1; }
static uint64_t down_seed(uint64_t seed) { return seed * 2 + 2; }

/* ---- connections ---------------------------------------------------------- */

typedef struct {
    uint32_t magic, flags;
    uint64_t seed, up_len, down_len;
} header;

typedef struct {
    uint64_t upload_hash, bad_offset; /* ~0: no mismatch */
} trailer;

enum { ST_CONNECTING, ST_HEADER, ST_RUN, ST_TRAILER, ST_DONE, ST_FAILED };

typedef struct {
    int fd, state, id;
    header hdr;
    size_t hdr_got;         /* server: header bytes read */
    uint64_t sent, recvd;   /* payload bytes */
    hasher hs, hr;          /* hashes of what was sent / received */
    uint64_t bad_offset;    /* first received byte that differed */
    uint8_t tail[sizeof(trailer)];
    size_t tail_n;          /* trailer bytes sent (server) or read (client) */
    int err;                /* errno that ended the connection */
} conn;

static uint8_t gen[CHUNK], rbuf[CHUNK];
static volatile sig_atomic_t stop;
static int half_close;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what) {
    fprintf(stderr, "rknp-rel-stream: %s: %s\n", what, strerror(errno));
    exit(2);
}

static void set_nonblock(int fd) {
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) die("fcntl");
}

static int make_addr(const char *host, int port, struct sockaddr_storage *ss,
                     socklen_t *len) {
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        *len = sizeof *a4;
        return AF_INET;
    }
    if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        *len = sizeof *a6;
        return AF_INET6;
    }
    fprintf(stderr, "rknp-rel-stream: bad address %s\n", host);
    exit(2);
}

/* Receives payload into the hash and compares it with the stream. */
static int recv_payload(conn *c, uint64_t seed, uint64_t want) {
    size_t room = want - c->recvd < CHUNK ? (size_t)(want - c->recvd) : CHUNK;
    ssize_t n = recv(c->fd, rbuf, room, 0);
    if (n < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
    if (n == 0) { errno = EPIPE; return -1; } /* EOF before the end */
    stream_fill(seed, c->recvd, gen, (size_t)n);
    if (c->bad_offset == UINT64_MAX && memcmp(gen, rbuf, (size_t)n) != 0)
        for (ssize_t i = 0; i < n; i++)
            if (gen[i] != rbuf[i]) { c->bad_offset = c->recvd + (uint64_t)i; break; }
    hash_feed(&c->hr, rbuf, (size_t)n);
    c->recvd += (uint64_t)n;
    return 1;
}

static int send_payload(conn *c, uint64_t seed, uint64_t want) {
    size_t len = want - c->sent < CHUNK ? (size_t)(want - c->sent) : CHUNK;
    stream_fill(seed, c->sent, gen, len);
    ssize_t n = send(c->fd, gen, len, MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
    hash_feed(&c->hs, gen, (size_t)n);
    c->sent += (uint64_t)n;
    return 1;
}

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

static int serve(int argc, char **argv) {
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
