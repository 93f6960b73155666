// SPDX-License-Identifier: Apache-2.0

// The child half: a process forked while the program is still
// single-threaded, which enters the target's user and network namespaces,
// waits for the parent's opaque pairs on a pipe, and hands the tap over with
// rknp_child_configure (the library's own child side). It can also open
// files inside the namespace (/proc/thread-self/net/tcp reads the netns of
// whoever opened it) and send them back.
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
    // Opened read-only in the target's network namespace and sent back
    // (take_netns_files), in this order; none: no return channel.
    std::vector<std::string> netns_files;
    bool quiet = false; // only errors and warnings on stderr
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
    // Sends the parent's opaque pairs (rknp_parent_opaque_get) and closes
    // the pipe. Throws Failure.
    void send_opaque(rknp_parent *parent);
    // Non-blocking reap; true once the child has exited (status in
    // *wstatus).
    bool try_reap(int *wstatus);

    // The plan's netns_files, once the child has sent them (call after it
    // handed the tap over). Throws Failure if they did not come.
    std::vector<UniqueFd> take_netns_files();

private:
    pid_t pid_ = -1;
    bool reaped_ = false;
    size_t netns_file_count_ = 0;
    UniqueFd pipe_;
    UniqueFd files_; // SOCK_SEQPACKET from the child, one SCM_RIGHTS message
};

} // namespace cmd
