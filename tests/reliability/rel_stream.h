// SPDX-License-Identifier: Apache-2.0

/*
 * rknp-rel-stream's shared parts (rel_stream.c describes the program):
 * the per-connection header and trailer on the wire, the connection
 * state, the deterministic streams and their hash, and the socket helpers
 * both the server (rel_stream_server.c) and the client use.
 */
#ifndef RKNP_REL_STREAM_H
#define RKNP_REL_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define MAGIC 0x5453524bu /* "KRST" little-endian */
#define CHUNK 65536

typedef struct { uint64_t h, count; uint8_t pend[8]; size_t npend; } hasher;

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

/* Bytes [off, off+len) of stream seed: byte k is byte k%8 of word k/8. */
void stream_fill(uint64_t seed, uint64_t off, uint8_t *buf, size_t len);
void hash_feed(hasher *s, const uint8_t *p, size_t len);
uint64_t hash_final(const hasher *s);
uint64_t up_seed(uint64_t seed);
uint64_t down_seed(uint64_t seed);

double now_s(void);
void die(const char *what); /* exits 2 */
void set_nonblock(int fd);
/* Parses an IPv4 or IPv6 address (exits 2 on a bad one); returns its family. */
int make_addr(const char *host, int port, struct sockaddr_storage *ss, socklen_t *len);
/* Receives payload into the hash and compares it with the stream; sends
 * the next part of the stream. 1: progress, 0: try again, -1: errno. */
int recv_payload(conn *c, uint64_t seed, uint64_t want);
int send_payload(conn *c, uint64_t seed, uint64_t want);

/* The server: rknp-rel-stream serve ADDR PORT [options]. */
int serve(int argc, char **argv);

#endif
