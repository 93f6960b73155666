// SPDX-License-Identifier: Apache-2.0
//
// rknp-udp-flood: both ends of a UDP rate test whose sender and receiver
// cost little per datagram, so that a network stack between them, not
// the tool, bounds the rate (tests/bench/udp_gso.sh --mmsg). iperf3 and
// Python send and read one datagram a call: on this project's 2-CPU
// machine iperf3 alone carries 1.5-1.6 Gbit/s of 1472-byte datagrams
// over loopback, less than the stacks under test. Here every call moves
// up to 64 datagrams (sendmmsg/recvmmsg); each one is still its own
// datagram on the wire, no UDP_SEGMENT and no UDP_GRO.
//
//   rknp-udp-flood source ADDR PORT LEN SECONDS [--wait-hello]
//       sends LEN-byte datagrams to ADDR:PORT for SECONDS, as fast as the
//       socket takes them; --wait-hello: binds ADDR:PORT instead and
//       sends to whoever says hello first (iperf3 -R's way through a
//       NAT). Prints "ready" once bound (with --wait-hello), then the
//       rate offered.
//   rknp-udp-flood sink ADDR PORT [--hello HOST:PORT]
//       receives on ADDR:PORT (8 MiB buffer) until a second passes
//       without data after the first (20 s for it); --hello: says hello
//       to HOST:PORT every 200 ms until data comes. Prints "ready", then
//       what arrived: datagrams, bytes and Gbit/s between the first and
//       the last.
//
// Exit status 0, 2 on bad arguments, 1 on a socket error. Only the
// addresses given are contacted.

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 64
#define MAX_LEN 65507

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int parse_addr(const char *host, const char *port, struct sockaddr_in *out) {
  char *end;
  long p = strtol(port, &end, 10);
  memset(out, 0, sizeof *out);
  out->sin_family = AF_INET;
  out->sin_port = htons((uint16_t)p);
  return *end == '\0' && p >= 0 && p <= 65535 && inet_pton(AF_INET, host, &out->sin_addr) == 1
             ? 0
             : -1;
}

// BATCH messages of one len-byte buffer each, the i-th at base + i * stride.
static void init_batch(struct iovec *iov, struct mmsghdr *msgs, uint8_t *base, size_t stride,
                       size_t len) {
  memset(msgs, 0, BATCH * sizeof *msgs);
  for (size_t i = 0; i < BATCH; ++i) {
    iov[i].iov_base = base + i * stride;
    iov[i].iov_len = len;
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
}

static int fail(const char *what) {
  fprintf(stderr, "rknp-udp-flood: %s: %s\n", what, strerror(errno));
  return 1;
}

static int source(const struct sockaddr_in *to, size_t len, double secs, int wait_hello) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return fail("socket");
  if (wait_hello) {
    struct sockaddr_in peer;
    socklen_t plen = sizeof peer;
    char hello[64];
    if (bind(s, (const struct sockaddr *)to, sizeof *to) != 0) return fail("bind");
    printf("ready\n");
    fflush(stdout);
    struct pollfd p = {.fd = s, .events = POLLIN};
    int r = poll(&p, 1, 20000);
    if (r == 0) errno = ETIMEDOUT;
    if (r != 1) return fail("waiting 20 s for a hello");
    if (recvfrom(s, hello, sizeof hello, 0, (struct sockaddr *)&peer, &plen) < 0)
      return fail("recvfrom");
    if (connect(s, (const struct sockaddr *)&peer, plen) != 0) return fail("connect");
  } else if (connect(s, (const struct sockaddr *)to, sizeof *to) != 0) {
    return fail("connect");
  }
  static uint8_t data[MAX_LEN];
  struct iovec iov[BATCH];
  struct mmsghdr msgs[BATCH];
  init_batch(iov, msgs, data, 0, len); // every datagram the same bytes
  uint64_t sent = 0;
  const double end = now_s() + secs;
  while (now_s() < end) {
    for (int k = 0; k < 16; ++k) {
      int n = sendmmsg(s, msgs, BATCH, 0);
      // A full or refused path (ENOBUFS, ECONNREFUSED from an ICMP
      // error): what arrives counts, the sender goes on.
      if (n > 0) sent += (uint64_t)n * len;
    }
  }
  printf("offered %.2f Gbit/s\n", (double)sent * 8 / secs / 1e9);
  close(s);
  return 0;
}

static int sink(const struct sockaddr_in *at, const struct sockaddr_in *hello) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return fail("socket");
  int buf = 8 << 20;
  // Root here (the host, or the child's namespace): past rmem_max.
  if (setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) != 0)
    (void)setsockopt(s, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  if (bind(s, (const struct sockaddr *)at, sizeof *at) != 0) return fail("bind");
  printf("ready\n");
  fflush(stdout);
  static uint8_t bufs[BATCH][MAX_LEN];
  struct iovec iov[BATCH];
  struct mmsghdr msgs[BATCH];
  init_batch(iov, msgs, bufs[0], MAX_LEN, MAX_LEN);
  uint64_t datagrams = 0, bytes = 0;
  double first = 0, last = 0;
  const double deadline = now_s() + 20;
  for (;;) {
    if (hello != NULL && datagrams == 0) {
      if (now_s() > deadline) break;
      (void)sendto(s, "hello", 5, 0, (const struct sockaddr *)hello, sizeof *hello);
    }
    struct pollfd p = {.fd = s, .events = POLLIN};
    int timeout = datagrams != 0 ? 1000 : hello != NULL ? 200 : 20000;
    int r = poll(&p, 1, timeout);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return fail("poll");
    if (r == 0) {
      if (datagrams != 0 || hello == NULL) break;
      continue;
    }
    int n = recvmmsg(s, msgs, BATCH, MSG_DONTWAIT, NULL);
    if (n <= 0) continue;
    last = now_s();
    if (datagrams == 0) first = last;
    datagrams += (uint64_t)n;
    for (int i = 0; i < n; ++i) bytes += msgs[i].msg_len;
  }
  const double span = last - first;
  printf("arrived %llu datagrams, %llu bytes in %.2f s: %.2f Gbit/s\n",
         (unsigned long long)datagrams, (unsigned long long)bytes, span,
         span > 0 ? (double)bytes * 8 / span / 1e9 : 0.0);
  close(s);
  return 0;
}

static int usage(void) {
  fprintf(stderr, "usage: rknp-udp-flood source ADDR PORT LEN SECONDS [--wait-hello]\n"
                  "       rknp-udp-flood sink ADDR PORT [--hello HOST:PORT]\n");
  return 2;
}

int main(int argc, char **argv) {
  struct sockaddr_in addr;
  if ((argc == 6 || argc == 7) && strcmp(argv[1], "source") == 0) {
    long len = strtol(argv[4], NULL, 10);
    double secs = strtod(argv[5], NULL);
    int wait_hello = argc == 7 && strcmp(argv[6], "--wait-hello") == 0;
    if (parse_addr(argv[2], argv[3], &addr) != 0 || len < 1 || len > MAX_LEN || secs <= 0 ||
        (argc == 7 && !wait_hello))
      return usage();
    return source(&addr, (size_t)len, secs, wait_hello);
  }
  if ((argc == 4 || argc == 6) && strcmp(argv[1], "sink") == 0) {
    struct sockaddr_in hello;
    if (parse_addr(argv[2], argv[3], &addr) != 0) return usage();
    if (argc == 4) return sink(&addr, NULL);
    char host[64];
    const char *colon = strrchr(argv[5], ':');
    if (strcmp(argv[4], "--hello") != 0 || colon == NULL ||
        (size_t)(colon - argv[5]) >= sizeof host)
      return usage();
    memcpy(host, argv[5], (size_t)(colon - argv[5]));
    host[colon - argv[5]] = '\0';
    if (parse_addr(host, colon + 1, &hello) != 0) return usage();
    return sink(&addr, &hello);
  }
  return usage();
}
