// SPDX-License-Identifier: Apache-2.0

// Library threads take no signals: blocking every one on the thread itself
// (never the process's dispositions) leaves them to the caller's threads,
// where Go's runtime expects them, and turns a write to a reset peer into
// EPIPE instead of SIGPIPE.
#pragma once

#include <pthread.h>
#include <signal.h>

namespace rknp {

inline void block_all_signals() noexcept {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
}

} // namespace rknp
