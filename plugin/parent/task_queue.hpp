// SPDX-License-Identifier: Apache-2.0

// Work that other threads hand to the stack thread (libslirp is not
// thread-safe). A task gets a StackLoop*, or nullptr when the loop is gone.
#pragma once

#include <functional>
#include <mutex>
#include <vector>

namespace rknp {

class StackLoop;

class TaskQueue {
public:
    using Task = std::function<void(StackLoop *)>;

    // Returns false (task not queued) once the queue is closed.
    bool post(Task t) {
        std::lock_guard lock(mu_);
        if (closed_) return false;
        tasks_.push_back(std::move(t));
        return true;
    }
    std::vector<Task> take() {
        std::lock_guard lock(mu_);
        return std::exchange(tasks_, {});
    }
    // Refuses further tasks; returns those never run.
    std::vector<Task> close() {
        std::lock_guard lock(mu_);
        closed_ = true;
        return std::exchange(tasks_, {});
    }

private:
    std::mutex mu_;
    std::vector<Task> tasks_;
    bool closed_ = false;
};

} // namespace rknp
