// The parent-side handle: owns the configuration, the stack thread and the
// opaque pairs for the child. start/close/queries are safe from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>

#include "config.hpp"
#include "fd.hpp"
#include "stats.hpp"

namespace rknp {

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

private:
    enum class State { Created, Running, Closed };

    ParentConfig cfg_;
    Stats stats_;
    std::mutex mu_; // serialises start and close
    State state_ = State::Created;
    std::atomic<bool> started_{false};
    std::atomic<bool> stop_{false};
    UniqueFd wake_;
    std::thread thread_;
    std::string socket_path_;
    KeyValues opaque_;
};

} // namespace rknp
