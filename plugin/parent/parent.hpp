// SPDX-License-Identifier: Apache-2.0

// The parent-side handle: owns the configuration, the stack thread, its log
// queue and the opaque pairs for the child. start/close/queries are safe
// from any thread; what each may do from inside the caller's log callback
// is in rknp.h (rknp_log_fn).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/config.hpp"
#include "common/log_queue.hpp"
#include "handover/child_setup.hpp"
#include "handover/server.hpp"
#include "common/fd.hpp"
#include "parent/forward_table.hpp"
#include "common/stats.hpp"
#include "parent/task_queue.hpp"

namespace rknp {

class StackLoop;

class Parent {
public:
    // Throws Error (the wake-up eventfd). before_stack_thread is a test
    // seam (tests/unit/test_parent_start.cpp), empty in the library: start
    // runs it just before it creates the stack thread, and a test makes it
    // throw std::system_error as std::thread does when it cannot create
    // one.
    explicit Parent(ParentConfig cfg,
                    std::function<void()> before_stack_thread = {});
    ~Parent();
    Parent(const Parent &) = delete;
    Parent &operator=(const Parent &) = delete;

    // Throws Error; a failed start leaves the handle as it was before it
    // (no socket file, no thread), usable for another start or close().
    // From inside a log callback: Error(RKNP_ERR_STATE).
    void start(const std::string &state_dir, pid_t child_pid);
    // From inside a log callback: only asks the stack to stop.
    void close() noexcept;
    // rknp_parent_free from inside a log callback, which cannot free the
    // handle: asks the stack to stop and says so once through the log.
    void refuse_free() noexcept;
    // Whether the calling thread is running a log callback (of any parent).
    static bool in_log_callback() noexcept { return LogQueue::in_callback(); }

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
    // Log lines a call made under a lock, for after it released the lock:
    // the callback may call back in (rknp.h).
    using Lines = std::vector<std::pair<int32_t, std::string>>;

    Lines start_locked(const std::string &state_dir, pid_t child_pid);
    // Starts the stack thread on server and waits until its stack is up;
    // throws Error with nothing left running.
    void launch_stack_thread(handover::Server server);
    // Sets stop_ and wakes the stack thread; never waits.
    void request_stop() noexcept;
    // Runs fn(loop) on the stack thread and waits; throws what fn throws.
    void on_stack(const std::function<void(StackLoop &)> &fn);

    // Before cfg_: the loggers in cfg_ and stack_cfg_ point at it.
    std::unique_ptr<LogQueue> logs_; // null without a log callback
    ParentConfig cfg_;               // logs in the calling thread
    ParentConfig stack_cfg_;         // the same, logging through logs_
    std::function<void()> before_stack_thread_; // the test seam
    Stats stats_;
    std::mutex mu_; // serialises start and close
    State state_ = State::Created;
    std::atomic<bool> started_{false};
    std::atomic<bool> stop_{false};
    std::atomic<bool> free_refusal_logged_{false};
    // From construction to destruction, never replaced: close() from a log
    // callback, which must not take mu_, and on_stack() write to it while
    // start() may run on another thread.
    UniqueFd wake_;
    std::thread thread_; // under mu_
    std::string socket_path_;
    KeyValues opaque_;
    TaskQueue tasks_;
    mutable std::mutex fwd_mu_; // serialises forward changes, guards fwds_
    ForwardTable fwds_;
};

} // namespace rknp
