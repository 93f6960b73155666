// SPDX-License-Identifier: Apache-2.0

// The stack thread's seccomp allowlist and Landlock ruleset. Both act on
// the calling thread only: no SECCOMP_FILTER_FLAG_TSYNC, and
// landlock_restrict_self and PR_SET_NO_NEW_PRIVS are per thread, so the
// caller's threads (Go's, in rootlesskit) keep exec, files and signals.
#include "parent/sandbox.hpp"

#include <fcntl.h>
#include <linux/if_tun.h>
#include <linux/seccomp.h>
#include <linux/sockios.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/fd.hpp"

namespace rknp {

namespace {

// ---- Landlock (kernel UAPI, spelled out: Debian 12's headers stop at
// ABI 2; the kernel's structs only grow, sized by the ABI we speak).

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif

constexpr uint32_t kCreateRulesetVersion = 1u << 0;
constexpr int kRulePathBeneath = 1;
constexpr uint64_t kFsReadFile = 1ull << 2;
constexpr uint64_t kFsAbi1 = (1ull << 13) - 1; // EXECUTE .. MAKE_SYM
constexpr uint64_t kFsRefer = 1ull << 13;      // ABI 2
constexpr uint64_t kFsTruncate = 1ull << 14;   // ABI 3
constexpr uint64_t kFsIoctlDev = 1ull << 15;   // ABI 5
constexpr uint64_t kScopeAbstractUnix = 1ull << 0; // ABI 6
constexpr uint64_t kScopeSignal = 1ull << 1;       // ABI 6

struct LandlockRulesetAttr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net; // ABI 4
    uint64_t scoped;             // ABI 6
};

struct __attribute__((packed)) LandlockPathBeneath {
    uint64_t allowed_access;
    int32_t parent_fd;
};

constexpr const char *kResolvConf = "/etc/resolv.conf";

// The directories libslirp's resolv.conf reads need: /etc/resolv.conf's
// own and, if it is a symlink, its target's. Directories, not the file:
// resolvers replace the file by rename and libslirp re-reads it then.
std::vector<std::string> resolv_conf_dirs() {
    std::set<std::string> dirs{"/etc"};
    if (char *real = ::realpath(kResolvConf, nullptr)) {
        std::string r(real);
        std::free(real);
        if (auto slash = r.rfind('/'); slash != std::string::npos)
            dirs.insert(slash == 0 ? "/" : r.substr(0, slash));
    }
    return {dirs.begin(), dirs.end()};
}

// Both need no_new_privs (or CAP_SYS_ADMIN). Asked for only when the call
// was refused without it: a caller's own process-wide filter may forbid
// prctl (rknp-slirp4netns --enable-seccomp kills on it) and has then set
// the flag itself; /proc may be absent there (its sandbox) to check first.
template <typename Call> int with_no_new_privs(Call call) {
    int rc = call();
    if (rc == -EPERM || rc == -EACCES) {
        if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
            throw_errno("prctl(PR_SET_NO_NEW_PRIVS)");
        rc = call();
    }
    return rc;
}

// ---- seccomp

struct CtxFree {
    void operator()(void *c) const { seccomp_release(c); }
};
using Ctx = std::unique_ptr<void, CtxFree>;

// Everything the loop, libslirp (with GLib's allocator and logging), the
// TCP fast path and the hand-over call on the stack thread, found by
// tracing the integration and e2e suites, plus thread exit.
constexpr const char *kAllowed[] = {
    // descriptors and sockets already open or made by the calls below
    "read", "write", "readv", "writev", "close", "lseek",
    "recvfrom", "recvmsg", "recvmmsg", "sendto", "sendmsg", "sendmmsg",
    "connect", "bind", "listen", "accept", "accept4", "shutdown",
    "setsockopt", "getsockopt", "getsockname", "getpeername",
    "poll", "ppoll", "epoll_wait", "epoll_pwait", "epoll_pwait2",
    "epoll_ctl",
    // libslirp checks /etc/resolv.conf for changes (Landlock limits which
    // files; openat is filtered on its flags below)
    "newfstatat", "fstat", "stat", "lstat", "statx",
    // time, memory, synchronisation, randomness
    "clock_gettime", "clock_getres", "gettimeofday", "time",
    "clock_nanosleep", "nanosleep", "sched_yield", "futex",
    "munmap", "mremap", "brk", "madvise", "getrandom",
    // identity (the hand-over compares uids), thread exit, signal masks
    "getpid", "gettid", "getuid", "geteuid", "getgid", "getegid",
    "exit", "exit_group", "rt_sigprocmask", "rt_sigreturn",
    "restart_syscall", "sigaltstack",
};

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// Sanitizer builds only (the asan/tsan presets): their runtimes probe memory
// through a pipe (UBSan's vptr check) and read their executable's name.
constexpr const char *kSanitizerRuntime[] = {"pipe", "pipe2", "readlink",
                                             "readlinkat"};
#endif

void add_rule(void *ctx, const char *name, std::vector<scmp_arg_cmp> args) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) return; // not on this architecture
    int rc = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr,
                                    unsigned(args.size()), args.data());
    if (rc < 0) throw_errno(std::string("seccomp rule for ") + name, -rc);
}

// A 32-bit argument equal to v (the upper half is not the caller's).
scmp_arg_cmp arg_is(unsigned arg, uint64_t v) {
    return SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, 0xffffffffu, v);
}
// A 32-bit argument whose bits in mask are v.
scmp_arg_cmp arg_bits(unsigned arg, uint64_t mask, uint64_t v) {
    return SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, mask & 0xffffffffu, v);
}

} // namespace

void install_landlock() {
    long abi = ::syscall(__NR_landlock_create_ruleset, nullptr, 0,
                         kCreateRulesetVersion);
    if (abi < 0) {
        int e = errno;
        throw Error(RKNP_ERR_UNSUPPORTED,
                    e == EOPNOTSUPP ? "Landlock is disabled in this kernel"
                                    : std::string("no Landlock in this "
                                                  "kernel (") +
                                          std::strerror(e) + ")");
    }
    LandlockRulesetAttr attr{};
    size_t attr_size = sizeof attr.handled_access_fs;
    attr.handled_access_fs = kFsAbi1;
    if (abi >= 2) attr.handled_access_fs |= kFsRefer;
    if (abi >= 3) attr.handled_access_fs |= kFsTruncate;
    // Guest traffic connects anywhere and forwards bind any port the
    // caller asks for at run time: no network rules (ABI 4) make sense.
    if (abi >= 4) attr_size = offsetof(LandlockRulesetAttr, scoped);
    if (abi >= 5) attr.handled_access_fs |= kFsIoctlDev;
    if (abi >= 6) {
        attr.scoped = kScopeAbstractUnix | kScopeSignal;
        attr_size = sizeof attr;
    }
    UniqueFd ruleset(int(::syscall(__NR_landlock_create_ruleset, &attr,
                                   attr_size, 0u)));
    if (!ruleset) throw_errno("landlock_create_ruleset");
    for (const std::string &dir : resolv_conf_dirs()) {
        UniqueFd d(::open(dir.c_str(), O_PATH | O_CLOEXEC | O_DIRECTORY));
        if (!d) continue; // nothing to read there anyway
        LandlockPathBeneath rule{kFsReadFile, d.get()};
        if (::syscall(__NR_landlock_add_rule, ruleset.get(), kRulePathBeneath,
                      &rule, 0u) != 0)
            throw_errno("landlock_add_rule " + dir);
    }
    // Per thread, as is no_new_privs.
    int rc = with_no_new_privs([&] {
        return ::syscall(__NR_landlock_restrict_self, ruleset.get(), 0u) == 0
                   ? 0
                   : -errno;
    });
    if (rc != 0) throw_errno("landlock_restrict_self", -rc);
}

void install_seccomp() {
    // Without seccomp(2) (pre-3.17 kernels, emulators such as valgrind)
    // libseccomp would fall back to prctl, which an emulator passes to the
    // kernel for its own threads too: no filter then.
    uint32_t errno_action = SECCOMP_RET_ERRNO;
    if (::syscall(__NR_seccomp, SECCOMP_GET_ACTION_AVAIL, 0u, &errno_action) != 0 &&
        errno == ENOSYS)
        throw Error(RKNP_ERR_UNSUPPORTED, "no seccomp(2) system call");
    // EPERM, not a kill: killing the thread would leave its locks (the
    // allocator's among them) held in a process that goes on running, and
    // killing the process ends rootlesskit and every container; a denied
    // call fails like any other and the caller copes or stops the stack.
    Ctx ctx(seccomp_init(SCMP_ACT_ERRNO(EPERM)));
    if (!ctx) throw Error(RKNP_ERR_SYSTEM, "seccomp_init failed");
    void *c = ctx.get();
    // Same for another architecture's calling convention (x32, i386).
    if (int rc = seccomp_attr_set(c, SCMP_FLTATR_ACT_BADARCH,
                                  SCMP_ACT_ERRNO(EPERM));
        rc < 0)
        throw_errno("seccomp bad-architecture action", -rc);
    // The kernel's errno from seccomp_load (EACCES without no_new_privs),
    // not libseccomp's ECANCELED.
    if (int rc = seccomp_attr_set(c, SCMP_FLTATR_API_SYSRAWRC, 1); rc < 0)
        throw_errno("seccomp raw return codes attribute", -rc);
    // The flag is ours to set (with_no_new_privs), not libseccomp's.
    if (int rc = seccomp_attr_set(c, SCMP_FLTATR_CTL_NNP, 0); rc < 0)
        throw_errno("seccomp no_new_privs attribute", -rc);
    // Denied calls reach the kernel's audit log where the kernel has it.
    if (seccomp_api_get() >= 3) (void)seccomp_attr_set(c, SCMP_FLTATR_CTL_LOG, 1);

    for (const char *name : kAllowed) add_rule(c, name, {});
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    for (const char *name : kSanitizerRuntime) add_rule(c, name, {});
#endif

    // New sockets: TCP and UDP (and ICMP echo, a datagram socket) over IPv4
    // and IPv6 only; no AF_UNIX, netlink, packet or raw sockets.
    constexpr uint64_t kTypeMask = ~uint64_t(SOCK_NONBLOCK | SOCK_CLOEXEC);
    for (int domain : {AF_INET, AF_INET6})
        for (int type : {SOCK_STREAM, SOCK_DGRAM})
            add_rule(c, "socket",
                     {arg_is(0, uint64_t(domain)),
                      arg_bits(1, kTypeMask, uint64_t(type))});
    // ioctl: the bytes waiting (libslirp's UDP), non-blocking mode, the
    // hand-over's tap check, an interface index (glibc's if_nametoindex
    // for a scoped nameserver) and isatty (GLib's logging).
    using ul = unsigned long;
    for (ul req : {ul(FIONREAD), ul(FIONBIO), ul(TUNGETIFF), ul(SIOCGIFINDEX),
                   ul(TCGETS)})
        add_rule(c, "ioctl", {arg_is(1, req)});
    for (int cmd : {F_GETFD, F_SETFD, F_GETFL, F_SETFL})
        add_rule(c, "fcntl", {arg_is(1, uint64_t(cmd))});
    // Memory, never executable: no mapping code that was written.
    add_rule(c, "mmap", {arg_bits(2, PROT_EXEC, 0)});
    add_rule(c, "mprotect", {arg_bits(2, PROT_EXEC, 0)});
    // Opening for reading only (what, Landlock says where).
    constexpr uint64_t kWriteish =
        O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND | O_TMPFILE;
    add_rule(c, "openat", {arg_bits(2, kWriteish, 0)});
    add_rule(c, "open", {arg_bits(1, kWriteish, 0)});
    // Resource limits read, never set (the flow limit follows the fd one).
    add_rule(c, "prlimit64", {SCMP_A2(SCMP_CMP_EQ, 0)});
    add_rule(c, "getrlimit", {});
    // abort() on this thread signals the thread itself, nothing else.
    add_rule(c, "tgkill",
             {arg_is(0, uint64_t(::getpid())), arg_is(1, uint64_t(::gettid()))});

    if (int rc = with_no_new_privs([c] { return seccomp_load(c); }); rc < 0)
        throw_errno("seccomp_load", -rc);
}

namespace {

// Runs one layer's installer; on failure returns why (for the summary
// line) and warns unless the kernel simply lacks it. nullopt: in force.
std::optional<std::string> try_layer(const char *name, void (*install)(),
                                     const Logger &log) {
    try {
        install();
        return std::nullopt;
    } catch (const Error &e) {
        if (e.code() != RKNP_ERR_UNSUPPORTED)
            log.warn(std::string("sandbox: ") + name + " not in force: " + e.what());
        return e.what();
    } catch (const std::exception &e) {
        log.warn(std::string("sandbox: ") + name + " not in force: " + e.what());
        return e.what();
    }
}

} // namespace

uint32_t confine_stack_thread(const Logger &log) noexcept {
    uint32_t bits = 0;
    const auto landlock = try_layer("Landlock", install_landlock, log);
    if (!landlock) bits |= RKNP_SANDBOX_LANDLOCK;
    const auto seccomp = try_layer("seccomp", install_seccomp, log);
    if (!seccomp) bits |= RKNP_SANDBOX_SECCOMP;
    std::string msg = "sandbox on the stack thread: seccomp ";
    msg += seccomp ? "off (" + *seccomp + ")" : "on";
    msg += ", Landlock ";
    msg += landlock ? "off (" + *landlock + ")" : "on";
    log.info(msg);
    return bits;
}

} // namespace rknp
