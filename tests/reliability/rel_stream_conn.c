// SPDX-License-Identifier: Apache-2.0

/*
 * rknp-rel-stream's deterministic streams, their hash and the connection
 * helpers both sides use (rel_stream.h).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rel_stream.h"

/* ---- deterministic streams and hashing ---------------------------------- */

/* ---- deterministic streams and hashing ---------------------------------- */

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Bytes [off, off+len) of stream seed: byte k is byte k%8 of word k/8. */
void stream_fill(uint64_t seed, uint64_t off, uint8_t *buf, size_t len) {
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

static void hash_word(hasher *s, uint64_t w) {
    s->h = (s->h ^ w) * 0x100000001b3ull;
    s->h ^= s->h >> 29;
}
void hash_feed(hasher *s, const uint8_t *p, size_t len) {
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
uint64_t hash_final(const hasher *s) {
    hasher t = *s;
    uint64_t w = 0;
    memcpy(&w, t.pend, t.npend);
    hash_word(&t, w ^ (uint64_t)t.npend << 56);
    hash_word(&t, t.count);
    return t.h;
}

uint64_t up_seed(uint64_t seed) { return seed * 2 + 1; }
uint64_t down_seed(uint64_t seed) { return seed * 2 + 2; }

/* ---- connections ---------------------------------------------------------- */

static uint8_t gen[CHUNK], rbuf[CHUNK];

double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void die(const char *what) {
    fprintf(stderr, "rknp-rel-stream: %s: %s\n", what, strerror(errno));
    exit(2);
}

void set_nonblock(int fd) {
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) die("fcntl");
}

int make_addr(const char *host, int port, struct sockaddr_storage *ss,
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
int recv_payload(conn *c, uint64_t seed, uint64_t want) {
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

int send_payload(conn *c, uint64_t seed, uint64_t want) {
    size_t len = want - c->sent < CHUNK ? (size_t)(want - c->sent) : CHUNK;
    stream_fill(seed, c->sent, gen, len);
    ssize_t n = send(c->fd, gen, len, MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
    hash_feed(&c->hs, gen, (size_t)n);
    c->sent += (uint64_t)n;
    return 1;
}
