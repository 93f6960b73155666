// SPDX-License-Identifier: Apache-2.0

// When to stop: a command exits by itself once its target is gone (pasta
// does, and Podman relies on it: it never kills a container's pasta, it
// deletes the namespace file; the tap would otherwise keep the namespace
// and the forwards alive). A PID target is gone when the process exits (a
// pidfd, polled); a --netns path when the file is deleted or no longer the
// namespace it was (an unmount), checked through a directory fd opened
// before the sandbox hides the path.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "unique_fd.hpp"

namespace cmd {

class TargetWatch {
public:
    // netns_path set: watch the path (unless quit is false); else watch
    // pid. Throws Failure.
    TargetWatch(pid_t pid, const std::optional<std::string> &netns_path, bool quit);

    // An fd that turns readable when the target is gone, or -1 (then only
    // gone() tells).
    int fd() const { return pidfd_.get(); }
    bool gone() const;

private:
    pid_t pid_ = 0;
    UniqueFd pidfd_;
    UniqueFd dir_;       // the netns file's directory (O_PATH)
    std::string name_;        // its name there
    dev_t dev_ = 0;
    ino_t ino_ = 0;
};

} // namespace cmd
