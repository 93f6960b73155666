// SPDX-License-Identifier: Apache-2.0

// The parent-side handle: owns the configuration, the stack thread, its log
// queue and the opaque pairs for the child. start/close/queries are safe
// from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/config.hpp"
#include "common/log_queue.hpp"
#include "handover/child_setup.hpp"
#include "common/fd.hpp"
#include "parent/forwards.hpp"
#include "common/stats.hpp"
#include "parent/task_queue.hpp"

namespace rknp {

class StackLoop;

class Parent {
public:
    explicit Parent(ParentConfig cfg);
    ~Parent();
    Parent(const Parent &) = delete;
    Parent &operator=(const Parent &) = delete;

    // Throws Error; the handle stays usable for close() afterwards.
    void start(const std::string &state_dir, pid_t child_pid);
    void close() noexcept;

    const ParentConfig &config() const { return cfg_; }
    const Stats &stats() const { return stats_; }
    // Stable after start() returned; empty before.
    const KeyValues &opaque() const { return opaque_; }
    bool started() const { return started_.load(); }

    // Port forwards; thread-safe, run on the stack thread. Throw Error.
    uint32_t add_forward(const rknp_forward &f);
    void remove_forward(uint32_t id);
    std::map<uint32_t, ForwardSpec> forwards() const;

private:
    enum class State { Created, Running, Closed };

    // Runs fn(loop) on the stack thread and waits; throws what fn throws.
    void on_stack(const std::function<void(StackLoop &)> &fn);

    // Before cfg_: the loggers in cfg_ and stack_cfg_ point at it.
    std::unique_ptr<LogQueue> logs_; // null without a log callback
    ParentConfig cfg_;               // logs in the calling thread
    ParentConfig stack_cfg_;         // the same, logging through logs_
    Stats stats_;
    std::mutex mu_; // serialises start and close
    State state_ = State::Created;
    std::atomic<bool> started_{false};
    std::atomic<bool> stop_{false};
    UniqueFd wake_;
    std::thread thread_;
    std::string socket_path_;
    KeyValues opaque_;
    TaskQueue tasks_;
    mutable std::mutex fwd_mu_; // serialises forward changes, guards fwds_
    ForwardTable fwds_;
};

} // namespace rknp
