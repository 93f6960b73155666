// SPDX-License-Identifier: Apache-2.0
//
// rknp-delay-line: a user-space WAN link between two tap devices, for the
// WAN test bed (tests/lib/wan_bed.sh). This machine's kernel has no netem,
// so the bed's delay, loss and reordering are made here: every frame read
// from one tap is written to the other one DELAY later; a seeded random
// draw drops a frame (--loss) or holds it back by an extra gap (--reorder)
// so that later frames overtake it.
//
// The taps are created beforehand (`ip tuntap add mode tap NAME`) and
// opened here by name; one of them may then be moved into another network
// namespace (`ip link set NAME netns NS`): the open fd stays attached.
//
// Design (it must never be the bottleneck of what it measures):
// - one thread per direction; each owns a ring of bytes, preallocated at
//   start and sized for bandwidth x delay, into which frames are read in
//   place (no allocation and no copy per frame, besides the kernel's);
// - the ring is a FIFO by due time (one delay per direction), so the head
//   is the next frame to send; reordered frames go to a second, small FIFO
//   with the same extra gap, and the writer takes whichever head is due
//   first;
// - ppoll with a nanosecond timeout until the next due frame;
// - with --offload (the default when loss and reordering are 0) the taps
//   use IFF_VNET_HDR + TUNSETOFFLOAD, so the kernels on either side pass
//   64 KiB TSO super-frames through unsegmented, as a real NIC with TSO/GRO
//   does; the virtio header is passed through verbatim. With loss or
//   reordering the offloads are off, so a frame is one MTU-sized packet and
//   --loss is a per-packet rate (dropping one 64 KiB super-frame would drop
//   ~44 segments at once);
// - the direction threads run SCHED_FIFO where allowed (--realtime auto,
//   the default): the line stands for a path, a wire or netem (which runs
//   in the kernel's softirq context, ahead of every task), so its frames
//   must not wait for a CPU behind the stacks it measures. At normal
//   priority on 2 vCPUs they did: in a 10 ms download the line's threads
//   spent 16-22 % of the time in the run queue, which delayed frames by
//   more than the stacks under test differ (tests/lib/WAN_BED.md).
//
// Measured (2 vCPU VM, kernel 6.18, 1500-MTU taps, iperf3 between the host
// netns and a test-host netns through this line, one stream, tcp_{r,w}mem
// max 64 MiB): 5.1 Gbit/s at 0 ms, 3.8-4.8 Gbit/s at 20 ms each way,
// a bare veth 4.5 Gbit/s meanwhile; the line used 26% of one core at
// 4.8 Gbit/s. Details: tests/lib/WAN_BED.md ("Throughput of the delay line").
//
// Usage: rknp-delay-line --tap-a NAME --tap-b NAME [--delay-ms D]
//        [--loss P] [--reorder P] [--reorder-gap-ms G] [--seed S]
//        [--ring-mib M] [--offload on|off|auto] [--realtime on|off|auto]
//        [--ready-file PATH]
// P are percentages (0.5 = one frame in 200). SIGTERM/SIGINT stop it and
// print per-direction counters on stderr; SIGUSR1 prints them and goes on;
// SIGUSR2 restarts both directions' random draws from the seed, so that
// runs compared with each other meet the same losses (common random
// numbers: the spread of the loss process then no longer hides the
// difference between two stacks).

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

// Largest frame a tap hands over: a 64 KiB GSO super-frame plus its
// Ethernet and virtio headers, with room to spare.
enum { MAX_FRAME = 65536 + 1024 };
// Records in a ring are aligned to this (their header holds a uint64).
enum { RECORD_ALIGN = 16 };
// The writer's longest sleep, so that a stop request is seen promptly.
static const int64_t MAX_SLEEP_NS = 50 * 1000 * 1000;
// SCHED_FIFO priority of the direction threads: ahead of every normal
// task, behind the kernel's own real-time threads (99). They sleep in
// ppoll between frames; the kernel's RT throttling (95 % of a CPU by
// default) bounds them if a bug ever made them spin.
static const int REALTIME_PRIORITY = 10;

struct record_header {
    uint64_t due_ns;  // CLOCK_MONOTONIC time at which the frame is written
    uint32_t length;  // frame bytes after this header; WRAP_MARK: go to the start
    uint32_t padding;
};
static const uint32_t WRAP_MARK = UINT32_MAX;

// A FIFO of variable-length records in one preallocated mapping. Only its
// own direction's thread touches it: no locking.
struct frame_ring {
    unsigned char *base;
    size_t capacity;
    size_t head;  // offset of the oldest record
    size_t tail;  // offset where the next record goes
    size_t used;  // bytes between head and tail, counting the skipped end
};

struct options {
    const char *tap_a;
    const char *tap_b;
    double delay_ms;
    double loss_percent;
    double reorder_percent;
    double reorder_gap_ms;
    uint64_t seed;
    size_t ring_mib;
    int offload;  // 1 on, 0 off, -1 auto
    int realtime; // 1 on, 0 off, -1 auto
    const char *ready_file;
};

struct direction {
    const char *name;  // "a->b"
    int from_fd;
    int to_fd;
    int64_t delay_ns;
    int64_t reorder_gap_ns;
    uint32_t loss_threshold;     // a draw below it drops the frame
    uint32_t reorder_threshold;  // a draw below it delays it by the gap
    uint64_t random_state;
    uint64_t seeded_state;  // random_state as the seed made it
    uint64_t seen_reseeds;  // reseeds this direction has applied
    struct frame_ring ring;
    struct frame_ring held;  // reordered frames, each due delay + gap
    // Counters, read by the signal-driven report from the main thread.
    _Atomic uint64_t frames_in, bytes_in, frames_out, bytes_out;
    _Atomic uint64_t dropped_loss, reordered, ring_full_waits, write_errors;
};

static atomic_bool stop_requested;
static _Atomic uint64_t reseeds;  // SIGUSR2s the main thread received

// Only the direction's own thread writes its counters: a relaxed load and
// store is enough, and cheaper than a locked add per frame.
static void bump(_Atomic uint64_t *counter, uint64_t by) {
    atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + by, memory_order_relaxed);
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// xorshift64*: seeded, so a run's losses can be replayed.
static uint32_t next_random(uint64_t *state) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return (uint32_t)((x * 0x2545F4914F6CDD1DULL) >> 32);
}

static uint32_t percent_to_threshold(double percent) {
    if (percent <= 0) return 0;
    if (percent >= 100) return UINT32_MAX;
    return (uint32_t)(percent / 100.0 * 4294967296.0);
}

static size_t align_up(size_t n) { return (n + RECORD_ALIGN - 1) & ~(size_t)(RECORD_ALIGN - 1); }

static int ring_init(struct frame_ring *ring, size_t capacity) {
    // MAP_NORESERVE: pages are touched only as far as the traffic fills
    // the ring, so a generous size costs nothing on a short path.
    capacity &= ~(size_t)4095;
    void *mem = mmap(NULL, capacity, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) return -1;
    ring->base = mem;
    // Records are RECORD_ALIGN-aligned and so is the end: a record never
    // straddles it and a wrap mark always fits.
    ring->capacity = capacity;
    ring->head = ring->tail = ring->used = 0;
    return 0;
}

// Where a record of up to `need` bytes (header included) can be written,
// wrapping to the start if the end is too short; NULL when full.
static struct record_header *ring_reserve(struct frame_ring *ring, size_t need) {
    if (ring->used == ring->capacity) return NULL;
    if (ring->tail >= ring->head || ring->used == 0) {
        // The free space is [tail, capacity) plus [0, head).
        size_t to_end = ring->capacity - ring->tail;
        if (to_end >= need) return (struct record_header *)(ring->base + ring->tail);
        // Not enough room at the end: the end is skipped, the record goes
        // at the start, if the start has room before the head.
        if (ring->used == 0) {
            ring->head = ring->tail = 0;
            return (struct record_header *)ring->base;
        }
        if (ring->head >= need) {
            if (to_end >= sizeof(struct record_header))
                ((struct record_header *)(ring->base + ring->tail))->length = WRAP_MARK;
            ring->used += to_end;
            ring->tail = 0;
            return (struct record_header *)ring->base;
        }
        return NULL;
    }
    // tail < head: the free space is the gap between them.
    if (ring->head - ring->tail >= need) return (struct record_header *)(ring->base + ring->tail);
    return NULL;
}

static void ring_commit(struct frame_ring *ring, uint32_t length) {
    size_t size = align_up(sizeof(struct record_header) + length);
    ring->tail += size;
    ring->used += size;
    if (ring->tail == ring->capacity) ring->tail = 0;
}

static struct record_header *ring_front(struct frame_ring *ring) {
    if (ring->used == 0) return NULL;
    size_t to_end = ring->capacity - ring->head;
    if (to_end < sizeof(struct record_header) ||
        ((struct record_header *)(ring->base + ring->head))->length == WRAP_MARK) {
        ring->used -= to_end;
        ring->head = 0;
        if (ring->used == 0) {
            ring->tail = 0;
            return NULL;
        }
    }
    return (struct record_header *)(ring->base + ring->head);
}

static void ring_pop(struct frame_ring *ring) {
    struct record_header *front = (struct record_header *)(ring->base + ring->head);
    size_t size = align_up(sizeof(struct record_header) + front->length);
    ring->head += size;
    ring->used -= size;
    if (ring->head == ring->capacity) ring->head = 0;
    if (ring->used == 0) ring->head = ring->tail = 0;
}

// Writes every frame whose time has come, oldest first across both FIFOs;
// returns the due time of the next one, or -1 if none is queued.
static int64_t send_due_frames(struct direction *dir, int64_t now) {
    for (;;) {
        struct record_header *main_front = ring_front(&dir->ring);
        struct record_header *held_front = ring_front(&dir->held);
        struct frame_ring *from = NULL;
        struct record_header *front = NULL;
        if (main_front && (!held_front || main_front->due_ns <= held_front->due_ns)) {
            from = &dir->ring;
            front = main_front;
        } else if (held_front) {
            from = &dir->held;
            front = held_front;
        }
        if (!front) return -1;
        if ((int64_t)front->due_ns > now) return (int64_t)front->due_ns;
        ssize_t n = write(dir->to_fd, front + 1, front->length);
        if (n < 0 && errno == EINTR) continue;
        // A tap write fails only for a frame the other side will not take
        // (e.g. its link is down): that frame is lost, as on a wire.
        if (n < 0) {
            bump(&dir->write_errors, 1);
        } else {
            bump(&dir->frames_out, 1);
            bump(&dir->bytes_out, (uint64_t)n);
        }
        ring_pop(from);
    }
}

// Reads every frame the tap has (non-blocking) into the ring; stops early
// when the ring has no room for a largest frame. Returns false on a read
// error other than "nothing more".
static bool receive_frames(struct direction *dir, bool *ring_full) {
    *ring_full = false;
    for (;;) {
        struct record_header *slot = ring_reserve(&dir->ring, sizeof(struct record_header) + MAX_FRAME);
        if (!slot) {
            *ring_full = true;
            bump(&dir->ring_full_waits, 1);
            return true;
        }
        ssize_t n = read(dir->from_fd, slot + 1, MAX_FRAME);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) return true;
            perror("rknp-delay-line: read from tap");
            return false;
        }
        if (n == 0) return true;
        int64_t arrived = now_ns();
        const uint64_t r = atomic_load_explicit(&reseeds, memory_order_relaxed);
        if (r != dir->seen_reseeds) {
            dir->seen_reseeds = r;
            dir->random_state = dir->seeded_state;
        }
        bump(&dir->frames_in, 1);
        bump(&dir->bytes_in, (uint64_t)n);
        if (dir->loss_threshold && next_random(&dir->random_state) < dir->loss_threshold) {
            bump(&dir->dropped_loss, 1);
            continue;  // never committed: the slot is reused
        }
        if (dir->reorder_threshold && next_random(&dir->random_state) < dir->reorder_threshold) {
            struct record_header *held = ring_reserve(&dir->held, align_up(sizeof(struct record_header) + (size_t)n));
            if (held) {
                memcpy(held + 1, slot + 1, (size_t)n);
                held->due_ns = (uint64_t)(arrived + dir->delay_ns + dir->reorder_gap_ns);
                held->length = (uint32_t)n;
                ring_commit(&dir->held, (uint32_t)n);
                bump(&dir->reordered, 1);
                continue;
            }
            // The hold-back FIFO is full: the frame goes in order.
        }
        slot->due_ns = (uint64_t)(arrived + dir->delay_ns);
        slot->length = (uint32_t)n;
        ring_commit(&dir->ring, (uint32_t)n);
    }
}

static void *run_direction(void *arg) {
    struct direction *dir = arg;
    // Wake-ups on time: the default 50 us slack would add to the delay.
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    bool ring_full = false;
    while (!atomic_load_explicit(&stop_requested, memory_order_relaxed)) {
        int64_t now = now_ns();
        int64_t next_due = send_due_frames(dir, now);
        int64_t sleep_ns = MAX_SLEEP_NS;
        if (next_due >= 0) {
            sleep_ns = next_due - now_ns();
            if (sleep_ns < 0) sleep_ns = 0;
            if (sleep_ns > MAX_SLEEP_NS) sleep_ns = MAX_SLEEP_NS;
        }
        // With a full ring the tap is not polled: the kernel queues (and
        // past its txqueuelen drops) frames, as a router's full buffer does.
        struct pollfd pfd = {.fd = dir->from_fd, .events = ring_full ? 0 : POLLIN};
        struct timespec timeout = {.tv_sec = sleep_ns / 1000000000, .tv_nsec = sleep_ns % 1000000000};
        int ready = ppoll(&pfd, 1, &timeout, NULL);
        if (ready < 0 && errno != EINTR) {
            perror("rknp-delay-line: ppoll");
            break;
        }
        // Frames that came due while we slept go first, so a full ring
        // makes room before reading.
        send_due_frames(dir, now_ns());
        if (ring_full || (ready > 0 && (pfd.revents & POLLIN))) {
            if (!receive_frames(dir, &ring_full)) break;
        }
        if (ready > 0 && (pfd.revents & (POLLERR | POLLHUP | POLLNVAL))) {
            fprintf(stderr, "rknp-delay-line: %s: tap gone\n", dir->name);
            break;
        }
    }
    atomic_store(&stop_requested, true);
    return NULL;
}

// Starts one direction's thread, SCHED_FIFO unless realtime is 0 (off);
// with -1 (auto) a refusal (EPERM: no root, no RLIMIT_RTPRIO) falls back
// to normal priority. `scheduling` says which for the start-up line.
static int start_direction(pthread_t *thread, struct direction *dir, int realtime,
                           char *scheduling, size_t scheduling_len) {
    if (realtime != 0) {
        pthread_attr_t attr;
        struct sched_param param = {.sched_priority = REALTIME_PRIORITY};
        pthread_attr_init(&attr);
        pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
        pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
        pthread_attr_setschedparam(&attr, &param);
        int err = pthread_create(thread, &attr, run_direction, dir);
        pthread_attr_destroy(&attr);
        if (err == 0) {
            snprintf(scheduling, scheduling_len, "SCHED_FIFO %d", REALTIME_PRIORITY);
            return 0;
        }
        if (realtime == 1 || err != EPERM) return err;
        snprintf(scheduling, scheduling_len, "normal priority (SCHED_FIFO: %s)", strerror(err));
    }
    return pthread_create(thread, NULL, run_direction, dir);
}

static int open_tap(const char *name, bool vnet_hdr, bool offload) {
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        perror("rknp-delay-line: open /dev/net/tun");
        return -1;
    }
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI | (vnet_hdr ? IFF_VNET_HDR : 0);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
        fprintf(stderr, "rknp-delay-line: TUNSETIFF %s: %s\n", name, strerror(errno));
        close(fd);
        return -1;
    }
    // Offloads off still matters with a vnet header: the kernel then
    // segments and checksums every frame before handing it over.
    unsigned long features = offload ? (TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6) : 0;
    if (vnet_hdr && ioctl(fd, TUNSETOFFLOAD, features) < 0) {
        fprintf(stderr, "rknp-delay-line: TUNSETOFFLOAD %s: %s\n", name, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static void print_counters(const struct direction *dirs, int count) {
    for (int i = 0; i < count; i++) {
        const struct direction *d = &dirs[i];
        fprintf(stderr,
                "rknp-delay-line: %s frames_in=%llu bytes_in=%llu frames_out=%llu bytes_out=%llu "
                "dropped_loss=%llu reordered=%llu ring_full_waits=%llu write_errors=%llu\n",
                d->name, (unsigned long long)atomic_load(&d->frames_in),
                (unsigned long long)atomic_load(&d->bytes_in), (unsigned long long)atomic_load(&d->frames_out),
                (unsigned long long)atomic_load(&d->bytes_out), (unsigned long long)atomic_load(&d->dropped_loss),
                (unsigned long long)atomic_load(&d->reordered),
                (unsigned long long)atomic_load(&d->ring_full_waits),
                (unsigned long long)atomic_load(&d->write_errors));
    }
}

static void usage(FILE *out) {
    fputs("usage: rknp-delay-line --tap-a NAME --tap-b NAME [--delay-ms D] [--loss PERCENT]\n"
          "       [--reorder PERCENT] [--reorder-gap-ms G] [--seed S] [--ring-mib M]\n"
          "       [--offload on|off|auto] [--realtime on|off|auto] [--ready-file PATH]\n"
          "Frames go each way after D ms (one way); --loss/--reorder are per frame.\n"
          "--offload auto (default): TSO super-frames pass when loss and reorder are 0;\n"
          "otherwise every frame is one MTU-sized packet.\n"
          "--realtime auto (default): the direction threads run SCHED_FIFO where\n"
          "allowed, at normal priority otherwise; on: SCHED_FIFO or fail.\n",
          out);
}

static bool parse_double(const char *text, double *out) {
    char *end;
    errno = 0;
    *out = strtod(text, &end);
    return errno == 0 && end != text && *end == '\0' && *out >= 0;
}

// "on" 1, "off" 0, "auto" -1.
static bool parse_on_off_auto(const char *text, int *out) {
    if (!strcmp(text, "on")) *out = 1;
    else if (!strcmp(text, "off")) *out = 0;
    else if (!strcmp(text, "auto")) *out = -1;
    else return false;
    return true;
}

static int parse_options(int argc, char **argv, struct options *opt) {
    *opt = (struct options){.reorder_gap_ms = 1.0, .seed = 1, .ring_mib = 0, .offload = -1, .realtime = -1};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "rknp-delay-line: %s needs a value\n", arg);
            return -1;
        }
        const char *value = argv[++i];
        bool ok = true;
        if (!strcmp(arg, "--tap-a")) opt->tap_a = value;
        else if (!strcmp(arg, "--tap-b")) opt->tap_b = value;
        else if (!strcmp(arg, "--delay-ms")) ok = parse_double(value, &opt->delay_ms);
        else if (!strcmp(arg, "--loss")) ok = parse_double(value, &opt->loss_percent) && opt->loss_percent <= 100;
        else if (!strcmp(arg, "--reorder")) ok = parse_double(value, &opt->reorder_percent) && opt->reorder_percent <= 100;
        else if (!strcmp(arg, "--reorder-gap-ms")) ok = parse_double(value, &opt->reorder_gap_ms);
        else if (!strcmp(arg, "--seed")) opt->seed = strtoull(value, NULL, 0);
        else if (!strcmp(arg, "--ring-mib")) opt->ring_mib = strtoull(value, NULL, 10);
        else if (!strcmp(arg, "--ready-file")) opt->ready_file = value;
        else if (!strcmp(arg, "--offload")) ok = parse_on_off_auto(value, &opt->offload);
        else if (!strcmp(arg, "--realtime")) ok = parse_on_off_auto(value, &opt->realtime);
        else {
            fprintf(stderr, "rknp-delay-line: unknown option %s\n", arg);
            usage(stderr);
            return -1;
        }
        if (!ok) {
            fprintf(stderr, "rknp-delay-line: bad value for %s: %s\n", arg, value);
            return -1;
        }
    }
    if (!opt->tap_a || !opt->tap_b) {
        usage(stderr);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    struct options opt;
    if (parse_options(argc, argv, &opt) < 0) return 2;
    bool offload = opt.offload == 1 || (opt.offload == -1 && opt.loss_percent == 0 && opt.reorder_percent == 0);

    // Bandwidth x delay, for 10 Gbit/s (twice the speed this line is
    // meant to carry), plus room for a burst; reordered frames wait
    // only the extra gap, a fraction of which they are of the traffic.
    size_t ring_bytes = opt.ring_mib ? opt.ring_mib << 20
                                     : (size_t)(10e9 / 8 * (opt.delay_ms + opt.reorder_gap_ms) / 1000) + (64u << 20);
    size_t held_bytes = (size_t)(10e9 / 8 * opt.reorder_gap_ms / 1000 * (opt.reorder_percent / 100)) + (8u << 20);

    // Signals are taken by the main thread only (sigwait below).
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGUSR1);
    sigaddset(&signals, SIGUSR2);
    sigaddset(&signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &signals, NULL);

    int fd_a = open_tap(opt.tap_a, true, offload);
    int fd_b = open_tap(opt.tap_b, true, offload);
    if (fd_a < 0 || fd_b < 0) return 1;

    static struct direction dirs[2];
    const char *names[2] = {"a->b", "b->a"};
    for (int i = 0; i < 2; i++) {
        struct direction *d = &dirs[i];
        d->name = names[i];
        d->from_fd = i == 0 ? fd_a : fd_b;
        d->to_fd = i == 0 ? fd_b : fd_a;
        d->delay_ns = (int64_t)(opt.delay_ms * 1e6);
        d->reorder_gap_ns = (int64_t)(opt.reorder_gap_ms * 1e6);
        d->loss_threshold = percent_to_threshold(opt.loss_percent);
        d->reorder_threshold = percent_to_threshold(opt.reorder_percent);
        // Two distinct non-zero streams from one seed.
        d->random_state = (opt.seed ^ (0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1))) | 1;
        d->seeded_state = d->random_state;
        if (ring_init(&d->ring, ring_bytes) < 0 || ring_init(&d->held, held_bytes) < 0) {
            perror("rknp-delay-line: mmap ring");
            return 1;
        }
    }

    pthread_t threads[2];
    char scheduling[64] = "normal priority";
    for (int i = 0; i < 2; i++) {
        int err = start_direction(&threads[i], &dirs[i], opt.realtime, scheduling, sizeof scheduling);
        if (err) {
            fprintf(stderr, "rknp-delay-line: starting a direction thread%s: %s\n",
                    opt.realtime == 1 ? " at SCHED_FIFO (--realtime on)" : "", strerror(err));
            return 1;
        }
    }
    fprintf(stderr,
            "rknp-delay-line: %s <-> %s, delay %.3f ms each way, loss %.3f%%, reorder %.3f%% (gap %.3f ms), "
            "seed %llu, offload %s, ring %zu MiB per direction, %s\n",
            opt.tap_a, opt.tap_b, opt.delay_ms, opt.loss_percent, opt.reorder_percent, opt.reorder_gap_ms,
            (unsigned long long)opt.seed, offload ? "on" : "off", ring_bytes >> 20, scheduling);
    if (opt.ready_file) {
        FILE *ready = fopen(opt.ready_file, "w");
        if (!ready) {
            perror("rknp-delay-line: ready file");
            return 1;
        }
        fprintf(ready, "%d\n", (int)getpid());
        fclose(ready);
    }

    // The worker threads stop on their own when a tap goes away; a 100 ms
    // sigtimedwait notices that too.
    const struct timespec tick = {.tv_sec = 0, .tv_nsec = 100 * 1000 * 1000};
    while (!atomic_load(&stop_requested)) {
        int sig = sigtimedwait(&signals, NULL, &tick);
        if (sig == SIGUSR1) print_counters(dirs, 2);
        else if (sig == SIGUSR2) atomic_fetch_add(&reseeds, 1);
        else if (sig > 0) atomic_store(&stop_requested, true);
    }
    for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
    print_counters(dirs, 2);
    close(fd_a);
    close(fd_b);
    return 0;
}
