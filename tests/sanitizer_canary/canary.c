// SPDX-License-Identifier: Apache-2.0

/*
 * rknp-sanitizer-canary: one deliberate bug per mode, so sanitizers-live.sh
 * can prove that the sanitizers of this build report what they should
 * (a suite whose sanitizers silently do nothing must not pass).
 *   leak      drops the only pointers to heap blocks   (LeakSanitizer)
 *   overflow  writes one byte past a heap block        (AddressSanitizer)
 *   ub        overflows a signed int                   (UBSan)
 *   race      two threads write one int unsynchronised (ThreadSanitizer)
 * Without the matching sanitizer each mode exits 0.
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* volatile: the compiler can neither see through nor drop the bugs. */
static void *volatile sink;
static int shared; /* plain: TSan must see the racing accesses */
static volatile int one = 1;

/* The pointers live only in this frame, which is gone when LSan looks. */
__attribute__((noinline)) static void drop_blocks(void) {
    for (int i = 0; i < 16; i++) {
        sink = malloc(64);
        sink = NULL;
    }
}

static void *writer(void *arg) {
    (void)arg;
    for (int i = 0; i < 100000; i++) shared = shared + 1;
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "leak")) {
        drop_blocks();
        return 0;
    }
    if (!strcmp(mode, "overflow")) {
        char *p = malloc(8);
        volatile size_t at = 8;
        p[at] = 1;
        free(p);
        return 0;
    }
    if (!strcmp(mode, "ub")) {
        volatile int big = INT_MAX;
        int r = big + one;
        return r == 0;
    }
    if (!strcmp(mode, "race")) {
        pthread_t a, b;
        pthread_create(&a, NULL, writer, NULL);
        pthread_create(&b, NULL, writer, NULL);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        return 0;
    }
    fprintf(stderr, "usage: rknp-sanitizer-canary leak|overflow|ub|race\n");
    return 2;
}
