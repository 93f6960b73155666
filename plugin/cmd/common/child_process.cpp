// SPDX-License-Identifier: Apache-2.0

// The child half: a process forked while the program is still
// single-threaded, which enters the target's user and network namespaces,
// waits for the parent's opaque pairs on a pipe, and hands the tap over with
// rknp_child_configure (the library's own child side).
#include "child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>

#include "errors.hpp"
#include "rknp_handle.hpp"

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

constexpr size_t kMaxNetnsFiles = 8;

// Opens plan.netns_files here, in the target's netns, and sends them in
// one message.
void send_netns_files(const ChildPlan &plan, int sock) {
    std::vector<UniqueFd> fds;
    for (const auto &path : plan.netns_files) {
        UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
        if (!fd) throw sys_failure("open " + path + " in the target's netns");
        fds.push_back(std::move(fd));
    }
    char byte = 0;
    iovec iov{&byte, 1};
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * kMaxNetnsFiles)] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    for (size_t i = 0; i < fds.size(); i++) {
        int fd = fds[i].get();
        std::memcpy(CMSG_DATA(c) + i * sizeof(int), &fd, sizeof fd);
    }
    if (::sendmsg(sock, &msg, MSG_NOSIGNAL) != 1)
        throw sys_failure("send the netns files");
}

void log_to_stderr(void *quiet, int32_t level, const char *msg) {
    if (level <= (quiet ? RKNP_LOG_WARN : RKNP_LOG_INFO))
        std::fprintf(stderr, "%s: child: %s\n",
                     program_invocation_short_name, msg);
}

// Runs in the forked child; returns the exit code.
int run_child(const ChildPlan &plan, int pipe_fd, int files_fd) {
    try {
        // slirp4netns' child has no use after its parent is gone either.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() == 1) return 1;
        for (int fd : plan.close_fds)
            if (fd >= 0) ::close(fd);
        enter_user_and_net(plan.ns);
        if (files_fd >= 0) send_netns_files(plan, files_fd);

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
        opts.log_user_data = plan.quiet ? const_cast<ChildPlan *>(&plan) : nullptr;
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
        if (!plan.quiet)
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
    if (plan.netns_files.size() > kMaxNetnsFiles)
        throw Failure("too many files to open in the target's netns");
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) < 0) throw sys_failure("pipe2");
    UniqueFd rd(fds[0]), wr(fds[1]);
    UniqueFd files_rd, files_wr;
    if (!plan.netns_files.empty()) {
        if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) < 0)
            throw sys_failure("socketpair");
        files_rd.reset(fds[0]);
        files_wr.reset(fds[1]);
    }
    std::fflush(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) throw sys_failure("fork");
    if (pid_ == 0) {
        wr.reset();
        files_rd.reset();
        int code = run_child(plan, rd.get(), files_wr.get());
        std::fflush(nullptr);
        ::_exit(code);
    }
    pipe_ = std::move(wr);
    files_ = std::move(files_rd);
    netns_file_count_ = plan.netns_files.size();
}

ChildProcess::~ChildProcess() {
    if (pid_ > 0 && !reaped_) {
        ::kill(pid_, SIGKILL);
        while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
        }
    }
}

void ChildProcess::send_opaque(rknp_parent *parent) {
    std::vector<std::pair<std::string, std::string>> kv;
    uint32_t n = rknp_parent_opaque_count(parent);
    for (uint32_t i = 0; i < n; i++) {
        const char *k = nullptr, *v = nullptr;
        rknp_error *err = nullptr;
        check(rknp_parent_opaque_get(parent, i, &k, &v, &err), err,
              "rknp_parent_opaque_get");
        kv.emplace_back(k, v);
    }
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

std::vector<UniqueFd> ChildProcess::take_netns_files() {
    std::vector<UniqueFd> out;
    if (!files_) return out;
    char byte = 0;
    iovec iov{&byte, 1};
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * kMaxNetnsFiles)] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl;
    msg.msg_controllen = sizeof ctl;
    // The child sent them before the hand-over, so they are queued here
    // already (or it never will: MSG_DONTWAIT).
    ssize_t n;
    do
        n = ::recvmsg(files_.get(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    files_.reset();
    if (n < 0) throw sys_failure("receive the netns files");
    for (cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            out.emplace_back(fd);
        }
    }
    if ((msg.msg_flags & MSG_CTRUNC) || out.size() != netns_file_count_)
        throw Failure("the child sent " + std::to_string(out.size()) + " of " +
                      std::to_string(netns_file_count_) + " netns files");
    return out;
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
