/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What rknp-harness and rknp-rel-driver share: rootlesskit's pattern of a
 * child process in a new user+network namespace that receives the parent's
 * opaque key/values over a pipe, runs the child side of the ABI and then
 * execs the command. Public ABI only.
 */
#ifndef RKNP_TEST_CHILD_H
#define RKNP_TEST_CHILD_H

#include <sys/types.h>

#include "rknp.h"

/* rknp_log_fn printing "rknp LEVEL: message" to the FILE * in user. */
void test_log_line(void *user, int32_t level, const char *msg);

typedef struct test_child {
    pid_t pid;
    int opaque_fd; /* write end of the pipe the child reads the values from */
} test_child;

/*
 * Forks the child and returns once its namespaces exist (so the caller can
 * start the parent side with its pid). The child enters a new user+net
 * namespace with root mapped to our uid/gid, unless netns is set: then it
 * stays in ours and the library makes the tap in netns. It dies with the
 * caller, exits 3 when its set-up fails and 127 when argv cannot be run.
 * log/log_user: the child side's log callback. Returns 0, or -1 with a
 * message on stderr prefixed by prog.
 */
int test_child_spawn(test_child *c, const char *prog, const char *netns,
                     char **argv, rknp_log_fn log, void *log_user);

/* Sends p's opaque values to the child and closes the pipe: the child side
 * then configures the network and execs the command. 0, or -1 with a
 * message on stderr. */
int test_child_send_opaque(test_child *c, const char *prog, const rknp_parent *p);

/* For a caller whose set-up failed after test_child_spawn: closes the pipe,
 * kills the child and reaps it. */
void test_child_abandon(test_child *c);

#endif
