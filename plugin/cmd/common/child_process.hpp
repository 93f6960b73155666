// SPDX-License-Identifier: Apache-2.0

// The child half: a process forked while the program is still
// single-threaded, which enters the target's user and network namespaces,
// waits for the parent's opaque pairs on a pipe, and hands the tap over with
// rknp_child_configure (the library's own child side).
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "namespaces.hpp"
#include "rknp.h"
#include "unique_fd.hpp"

namespace cmd {

struct ChildPlan {
    TargetNamespaces ns;
    bool configure = true;       // false: remove the IPv4 address again
    rknp_network network{};      // what rknp configures (for the removal)
    std::string remove_dir;      // non-empty: rm this state dir when done
    std::vector<int> close_fds;  // the parent's fds the child must not hold
};

class ChildProcess {
public:
    // Forks; the child runs plan and _exits (0 on success, 1 on failure),
    // never returning here. Call before any thread exists.
    explicit ChildProcess(const ChildPlan &plan);
    ChildProcess(const ChildProcess &) = delete;
    ChildProcess &operator=(const ChildProcess &) = delete;
    // Kills and reaps a child that is still running.
    ~ChildProcess();

    pid_t pid() const { return pid_; }
    // Sends the opaque pairs and closes the pipe. Throws Failure.
    void send_opaque(const std::vector<std::pair<std::string, std::string>> &kv);
    // Non-blocking reap; true once the child has exited (status in
    // *wstatus).
    bool try_reap(int *wstatus);

private:
    pid_t pid_ = -1;
    bool reaped_ = false;
    UniqueFd pipe_;
};

} // namespace cmd
