// SPDX-License-Identifier: Apache-2.0

// --enable-seccomp: a libseccomp filter that kills the process on every
// system call slirp4netns 1.2 blocks plus more (namespace creation, io_uring,
// bpf, keyrings, ...) and on any foreign-architecture system call.
#include "seccomp_filter.hpp"

#include <sched.h>
#include <seccomp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "errors.hpp"

namespace cmd {

namespace {

// slirp4netns 1.2's list (seccompfilter_rules.h), by systemd group.
constexpr const char *kSlirp4netnsBlocked[] = {
    "execve",                                                  // @default
    "lookup_dcookie", "pidfd_getfd", "ptrace",                 // @debug
    "process_vm_readv", "process_vm_writev",                   // @ipc
    "delete_module", "finit_module", "init_module",            // @module
    "chroot", "fsconfig", "fsmount", "fsopen", "fspick",       // @mount
    "mount", "move_mount", "open_tree", "pivot_root", "umount",
    "umount2",
    "open_by_handle_at",                                       // @privileged
    "execveat", "pidfd_open", "pidfd_send_signal", "prctl",    // @process
    "setns", "unshare",
    "kexec_file_load", "kexec_load", "reboot",                 // @reboot
    "name_to_handle_at",                                       // @system-service
};

// Beyond slirp4netns: nothing the stack needs, each a known escalation or
// filter-bypass surface.
constexpr const char *kAlsoBlocked[] = {
    "bpf", "perf_event_open", "userfaultfd", "add_key", "keyctl",
    "request_key", "kcmp", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "personality", "uselib", "acct", "swapon",
    "swapoff", "syslog", "vhangup", "mount_setattr", "quotactl",
    "setdomainname", "sethostname", "settimeofday", "clock_settime",
    "clock_adjtime", "adjtimex", "iopl", "ioperm", "fanotify_init",
    "process_madvise", "migrate_pages", "move_pages", "mbind",
};

constexpr uint64_t kNamespaceFlags[] = {
    CLONE_NEWNS,  CLONE_NEWUSER, CLONE_NEWNET,   CLONE_NEWPID,
    CLONE_NEWIPC, CLONE_NEWUTS,  CLONE_NEWCGROUP};

struct CtxFree {
    void operator()(scmp_filter_ctx c) const { seccomp_release(c); }
};

} // namespace

void enable_seccomp(bool announce) {
    // KILL_PROCESS (API level 3, kernel 4.14) ends every thread at once.
    uint32_t kill = seccomp_api_get() >= 3 ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_KILL;
    // Allow by default and block explicitly, as slirp4netns: libslirp's
    // needs depend on the host's resolver set-up. The filter has only the
    // native architecture, so any other (x32, i386 via int 0x80) kills.
    std::unique_ptr<void, CtxFree> ctx(seccomp_init(SCMP_ACT_ALLOW));
    if (!ctx) throw Failure("seccomp: seccomp_init failed");
    if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, kill); rc)
        throw Failure(std::string("seccomp: bad-arch action: ") + std::strerror(-rc));
    // Every thread of the process gets the filter, not only the caller's:
    // rknp-pasta's thread in the target's namespace (-T/-U) starts before it.
    if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_TSYNC, 1); rc)
        throw Failure(std::string("seccomp: thread synchronisation: ") + std::strerror(-rc));
    std::string blocked, skipped;
    auto block = [&](const char *name) {
        int nr = seccomp_syscall_resolve_name(name);
        if (nr == __NR_SCMP_ERROR) {
            skipped += std::string(" ") + name;
            return;
        }
        if (int rc = seccomp_rule_add(ctx.get(), kill, nr, 0); rc != 0)
            throw Failure(std::string("seccomp: block ") + name + ": " +
                          std::strerror(-rc));
        blocked += std::string(" ") + name;
    };
    for (const char *n : kSlirp4netnsBlocked) block(n);
    for (const char *n : kAlsoBlocked) block(n);
    // No new namespaces: clone with a CLONE_NEW* flag kills; clone3 (whose
    // flags a filter cannot see) answers ENOSYS so glibc falls back to
    // clone for threads.
    for (uint64_t flag : kNamespaceFlags) {
        int rc = seccomp_rule_add(ctx.get(), kill, SCMP_SYS(clone), 1,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
        if (rc != 0)
            throw Failure(std::string("seccomp: clone rule: ") +
                          std::strerror(-rc));
    }
    if (int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(ENOSYS),
                                  SCMP_SYS(clone3), 0);
        rc != 0)
        throw Failure(std::string("seccomp: clone3 rule: ") + std::strerror(-rc));
    if (int rc = seccomp_load(ctx.get()); rc != 0)
        throw Failure(std::string("seccomp: seccomp_load(): ") + std::strerror(-rc));
    if (announce)
        std::printf("seccomp: The following syscalls are blocked:%s "
                    "clone(CLONE_NEW*) clone3(ENOSYS)\n", blocked.c_str());
    if (!skipped.empty())
        std::fprintf(stderr, "seccomp: WARNING: not known to libseccomp, not "
                             "blocked:%s\n", skipped.c_str());
}

} // namespace cmd
