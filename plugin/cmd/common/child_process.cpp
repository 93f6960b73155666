// SPDX-License-Identifier: Apache-2.0

// The child half: a process forked while the program is still
// single-threaded, which enters the target's user and network namespaces,
// waits for the parent's opaque pairs on a pipe, and hands the tap over with
// rknp_child_configure (the library's own child side).
#include "child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>

#include "errors.hpp"

namespace cmd {

namespace {

void write_all(int fd, const void *data, size_t len) {
    auto *p = static_cast<const char *>(data);
    while (len > 0) {
        ssize_t n = ::write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw sys_failure("write to the child");
        p += n;
        len -= size_t(n);
    }
}

void read_all(int fd, void *data, size_t len) {
    auto *p = static_cast<char *>(data);
    while (len > 0) {
        ssize_t n = ::read(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw sys_failure("read opaque pairs");
        if (n == 0) throw Failure("the parent closed the pipe early");
        p += n;
        len -= size_t(n);
    }
}

std::string read_string(int fd) {
    uint32_t len = 0;
    read_all(fd, &len, sizeof len);
    if (len > 65536) throw Failure("opaque value too long");
    std::string s(len, '\0');
    read_all(fd, s.data(), len);
    return s;
}

void log_to_stderr(void *, int32_t level, const char *msg) {
    if (level <= RKNP_LOG_INFO)
        std::fprintf(stderr, "%s: child: %s\n",
                     program_invocation_short_name, msg);
}

// Runs in the forked child; returns the exit code.
int run_child(const ChildPlan &plan, int pipe_fd) {
    try {
        // slirp4netns' child has no use after its parent is gone either.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() == 1) return 1;
        for (int fd : plan.close_fds)
            if (fd >= 0) ::close(fd);
        enter_user_and_net(plan.ns);

        uint32_t count = 0;
        read_all(pipe_fd, &count, sizeof count);
        if (count > 256) throw Failure("too many opaque pairs");
        std::vector<std::string> strings;
        strings.reserve(2 * count);
        for (uint32_t i = 0; i < 2 * count; i++)
            strings.push_back(read_string(pipe_fd));
        std::vector<rknp_kv> kv(count);
        for (uint32_t i = 0; i < count; i++)
            kv[i] = {strings[2 * i].c_str(), strings[2 * i + 1].c_str()};

        rknp_child_options opts{};
        rknp_child_options_init(&opts, sizeof opts);
        opts.log_fn = log_to_stderr;
        // Without --configure the caller (rootlesskit) adds the address
        // and route itself, and fails if they exist.
        opts.link_only = plan.configure ? 0 : 1;
        char dev[16] = {};
        rknp_error *err = nullptr;
        rknp_status st = rknp_child_configure(kv.data(), count, &opts, dev,
                                              sizeof dev, &err);
        if (st != RKNP_OK) {
            std::string msg = rknp_error_message(err);
            rknp_error_free(err);
            throw Failure("rknp_child_configure: " + msg);
        }
        if (!plan.remove_dir.empty()) {
            // The tap is handed over: the hand-over socket has done its
            // job. Removing it from this (host) mount namespace also works
            // when the sandboxed parent sees the dir as a bind mount.
            std::string sock = plan.remove_dir + "/rknp.sock";
            ::unlink(sock.c_str());
            ::rmdir(plan.remove_dir.c_str());
        }
        std::fprintf(stderr, "%s: tap %s handed over%s\n",
                     program_invocation_short_name, dev,
                     plan.configure ? " (configured)" : "");
        return 0;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "%s: child: %s\n",
                     program_invocation_short_name, e.what());
        return 1;
    }
}

} // namespace

ChildProcess::ChildProcess(const ChildPlan &plan) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) < 0) throw sys_failure("pipe2");
    UniqueFd rd(fds[0]), wr(fds[1]);
    std::fflush(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) throw sys_failure("fork");
    if (pid_ == 0) {
        wr.reset();
        int code = run_child(plan, rd.get());
        std::fflush(nullptr);
        ::_exit(code);
    }
    pipe_ = std::move(wr);
}

ChildProcess::~ChildProcess() {
    if (pid_ > 0 && !reaped_) {
        ::kill(pid_, SIGKILL);
        while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
        }
    }
}

void ChildProcess::send_opaque(
    const std::vector<std::pair<std::string, std::string>> &kv) {
    auto put = [&](const std::string &s) {
        uint32_t len = uint32_t(s.size());
        write_all(pipe_.get(), &len, sizeof len);
        write_all(pipe_.get(), s.data(), s.size());
    };
    uint32_t count = uint32_t(kv.size());
    try {
        write_all(pipe_.get(), &count, sizeof count);
        for (const auto &[k, v] : kv) {
            put(k);
            put(v);
        }
    } catch (const Failure &) {
        // The child is gone (its exit status says why) or will see EOF.
        pipe_.reset();
        throw;
    }
    pipe_.reset();
}

bool ChildProcess::try_reap(int *wstatus) {
    if (reaped_) return true;
    pid_t r;
    do
        r = ::waitpid(pid_, wstatus, WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r < 0) throw sys_failure("waitpid");
    if (r == pid_) reaped_ = true;
    return reaped_;
}

} // namespace cmd
