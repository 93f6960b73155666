// SPDX-License-Identifier: Apache-2.0
//
// rknp-udp-rr: UDP request/response latency for the benchmark suite
// (tests/bench, test "udp_rr"). One datagram outstanding at a time: the
// client sends SIZE bytes, waits for the echo, and times the round trip
// with CLOCK_MONOTONIC; the server echoes every datagram to its sender.
// In C so that the per-request cost of the tool stays far below the
// differences between network stacks (Python's is tens of microseconds).
//
//   rknp-udp-rr server ADDR PORT
//   rknp-udp-rr client ADDR PORT [--size N] [--count N] [--warmup N]
//               [--seconds S] [--timeout-ms T]
//
// The client stops after --count timed round trips (default 3000) or
// --seconds (default 3), whichever comes first, after --warmup untimed
// ones (default 20). A request that gets no answer within --timeout-ms
// (default 200) is counted as lost and the next one is sent; every
// datagram carries a sequence number, so a late answer to an earlier
// request is recognised and dropped, never timed. It prints one JSON line:
//   {"n": timed, "lost": N, "stale": N, "p50_us": .., "p99_us": .., ...}
// and exits 0 if at least one round trip was timed. The server runs until
// SIGTERM/SIGINT. Only the address given is contacted.

#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_DATAGRAM 65507

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void usage(void) {
  fprintf(stderr,
          "usage: rknp-udp-rr server ADDR PORT\n"
          "       rknp-udp-rr client ADDR PORT [--size N] [--count N] "
          "[--warmup N] [--seconds S] [--timeout-ms T]\n");
  exit(2);
}

// A UDP socket bound (server) or connected (client) to ADDR:PORT.
static int open_socket(const char *addr, const char *port, int server) {
  struct addrinfo hints, *ai;
  memset(&hints, 0, sizeof(hints));
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  int rc = getaddrinfo(addr, port, &hints, &ai);
  if (rc != 0) {
    fprintf(stderr, "rknp-udp-rr: %s:%s: %s\n", addr, port, gai_strerror(rc));
    exit(1);
  }
  int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || (server ? bind(fd, ai->ai_addr, ai->ai_addrlen)
                        : connect(fd, ai->ai_addr, ai->ai_addrlen)) != 0) {
    fprintf(stderr, "rknp-udp-rr: %s %s:%s: %s\n", server ? "bind" : "connect",
            addr, port, strerror(errno));
    exit(1);
  }
  freeaddrinfo(ai);
  return fd;
}

static int serve(int fd) {
  static unsigned char buf[MAX_DATAGRAM];
  for (;;) {
    struct sockaddr_storage peer;
    socklen_t plen = sizeof(peer);
    ssize_t n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&peer, &plen);
    if (n < 0) {
      if (errno == EINTR) continue;
      fprintf(stderr, "rknp-udp-rr: recvfrom: %s\n", strerror(errno));
      return 1;
    }
    // A full socket buffer on the way back is a loss the client counts.
    (void)sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&peer, plen);
  }
}

struct stats {
  long lost, stale;
};

// One round trip of request seq: returns its time in ns, or -1 if no
// answer to it came within timeout_ns (then it is counted as lost).
static int64_t round_trip(int fd, unsigned char *msg, size_t size,
                          uint64_t seq, int64_t timeout_ns, struct stats *st) {
  static unsigned char reply[MAX_DATAGRAM];
  memcpy(msg, &seq, sizeof(seq));
  int64_t t0 = now_ns();
  if (send(fd, msg, size, 0) < 0 && errno != ECONNREFUSED) {
    fprintf(stderr, "rknp-udp-rr: send: %s\n", strerror(errno));
    exit(1);
  }
  int64_t deadline = t0 + timeout_ns;
  for (;;) {
    ssize_t n = recv(fd, reply, sizeof(reply), MSG_DONTWAIT);
    if (n >= (ssize_t)sizeof(seq)) {
      uint64_t got;
      memcpy(&got, reply, sizeof(got));
      if (got == seq && (size_t)n == size) return now_ns() - t0;
      st->stale++;  // the late answer to a request already counted as lost
      continue;
    }
    if (n >= 0) continue;  // a runt: not ours
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
        errno != ECONNREFUSED) {
      fprintf(stderr, "rknp-udp-rr: recv: %s\n", strerror(errno));
      exit(1);
    }
    int64_t left = deadline - now_ns();
    if (left <= 0) break;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    struct timespec ts = {.tv_sec = left / 1000000000, .tv_nsec = left % 1000000000};
    (void)ppoll(&p, 1, &ts, NULL);
  }
  st->lost++;
  return -1;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static int client(int fd, size_t size, long count, long warmup, double seconds,
                  long timeout_ms) {
  unsigned char *msg = calloc(1, size);
  int64_t *lat = calloc((size_t)count, sizeof(*lat));
  if (!msg || !lat) {
    fprintf(stderr, "rknp-udp-rr: out of memory\n");
    return 1;
  }
  memset(msg, 'x', size);
  struct stats st = {0, 0};
  int64_t timeout_ns = (int64_t)timeout_ms * 1000000;
  uint64_t seq = 1;
  for (long i = 0; i < warmup; i++) (void)round_trip(fd, msg, size, seq++, timeout_ns, &st);
  st.lost = st.stale = 0;
  long n = 0;
  int64_t stop = now_ns() + (int64_t)(seconds * 1e9);
  while (n < count && now_ns() < stop) {
    int64_t t = round_trip(fd, msg, size, seq++, timeout_ns, &st);
    if (t >= 0) lat[n++] = t;
  }
  if (n == 0) {
    printf("{\"error\": \"no answer to %ld requests\", \"lost\": %ld}\n", st.lost, st.lost);
    return 1;
  }
  qsort(lat, (size_t)n, sizeof(*lat), cmp_i64);
  double sum = 0;
  for (long i = 0; i < n; i++) sum += (double)lat[i];
  // The same percentile pick as tests/bench/agent.py's TCP ping-pong.
#define PICK(q) ((double)lat[(long)((q) * n) < n ? (long)((q) * n) : n - 1] / 1000.0)
  printf("{\"n\": %ld, \"lost\": %ld, \"stale\": %ld, \"size\": %zu, "
         "\"p50_us\": %.2f, \"p99_us\": %.2f, \"mean_us\": %.2f, "
         "\"min_us\": %.2f, \"max_us\": %.2f}\n",
         n, st.lost, st.stale, size, PICK(0.50), PICK(0.99), sum / (double)n / 1000.0,
         (double)lat[0] / 1000.0, (double)lat[n - 1] / 1000.0);
#undef PICK
  free(lat);
  free(msg);
  return 0;
}

static long num_arg(const char *s, long lo, long hi) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < lo || v > hi) usage();
  return v;
}

int main(int argc, char **argv) {
  if (argc < 4) usage();
  if (strcmp(argv[1], "server") == 0) {
    if (argc != 4) usage();
    return serve(open_socket(argv[2], argv[3], 1));
  }
  if (strcmp(argv[1], "client") != 0) usage();
  long size = 64, count = 3000, warmup = 20, timeout_ms = 200;
  double seconds = 3;
  for (int i = 4; i < argc; i += 2) {
    if (i + 1 >= argc) usage();
    if (strcmp(argv[i], "--size") == 0) size = num_arg(argv[i + 1], 8, MAX_DATAGRAM);
    else if (strcmp(argv[i], "--count") == 0) count = num_arg(argv[i + 1], 1, 10000000);
    else if (strcmp(argv[i], "--warmup") == 0) warmup = num_arg(argv[i + 1], 0, 1000000);
    else if (strcmp(argv[i], "--seconds") == 0) seconds = (double)num_arg(argv[i + 1], 1, 3600);
    else if (strcmp(argv[i], "--timeout-ms") == 0) timeout_ms = num_arg(argv[i + 1], 1, 60000);
    else usage();
  }
  return client(open_socket(argv[2], argv[3], 0), (size_t)size, count, warmup,
                seconds, timeout_ms);
}
