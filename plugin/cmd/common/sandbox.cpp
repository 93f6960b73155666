// SPDX-License-Identifier: Apache-2.0

// --enable-sandbox: a private mount namespace whose root is an empty,
// read-only tmpfs holding only read-only binds of /etc and /run (for
// resolv.conf) and a writable bind of rknp's state dir; then no new
// privileges and every capability but CAP_NET_BIND_SERVICE dropped.
#include "sandbox.hpp"

#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "errors.hpp"
#include "namespaces.hpp"
#include "unique_fd.hpp"

namespace cmd {

namespace {

constexpr const char *kNewRoot = "/tmp"; // as slirp4netns: hidden by tmpfs
constexpr unsigned long kLocked = MS_NOSUID | MS_NODEV | MS_NOEXEC;

void mount_or_throw(const char *src, const char *dst, const char *type,
                    unsigned long flags, const char *data,
                    const std::string &what) {
    if (::mount(src, dst, type, flags, data) < 0) throw sys_failure(what);
}

// mkdir -p below the new root (paths are absolute).
void make_dirs(const std::string &root, const std::string &path) {
    std::string cur = root;
    size_t pos = 1;
    while (pos <= path.size()) {
        size_t next = path.find('/', pos);
        if (next == std::string::npos) next = path.size();
        if (next > pos) {
            cur += "/" + path.substr(pos, next - pos);
            if (::mkdir(cur.c_str(), 0755) < 0 && errno != EEXIST)
                throw sys_failure("sandbox: mkdir " + cur);
        }
        pos = next + 1;
    }
}

// Binds the directory open at fd (through /proc/self/fd, so a path the new
// root hides still works) to dst; read-only unless writable.
void bind_fd(int fd, const std::string &dst, bool writable,
             const std::string &name) {
    std::string src = "/proc/self/fd/" + std::to_string(fd);
    mount_or_throw(src.c_str(), dst.c_str(), nullptr, MS_BIND | MS_REC, nullptr,
                   "sandbox: bind " + name);
    mount_or_throw(nullptr, dst.c_str(), nullptr, MS_SLAVE | MS_REC, nullptr,
                   "sandbox: make " + name + " a slave");
    unsigned long ro = writable ? 0 : MS_RDONLY;
    mount_or_throw(nullptr, dst.c_str(), nullptr,
                   MS_REMOUNT | MS_BIND | ro | kLocked, nullptr,
                   "sandbox: remount " + name);
}

// As slirp4netns: warn when resolv.conf points outside what is kept.
void check_resolv_conf() {
    char *real = ::realpath("/etc/resolv.conf", nullptr);
    if (!real) return;
    std::unique_ptr<char, decltype(&std::free)> guard(real, std::free);
    if (std::strncmp(real, "/etc/", 5) != 0 && std::strncmp(real, "/run/", 5) != 0)
        std::fprintf(stderr,
                     "sandbox: /etc/resolv.conf (-> %s) seems a symlink to a "
                     "file outside {/etc, /run}. DNS will not work.\n",
                     real);
}

} // namespace

void drop_capabilities() {
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        throw sys_failure("prctl(PR_SET_NO_NEW_PRIVS)");
    if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
        throw sys_failure("prctl(PR_CAP_AMBIENT_CLEAR_ALL)");
    for (int cap = 0;; cap++) {
        if (cap == CAP_NET_BIND_SERVICE) continue;
        if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
            if (errno == EINVAL) break; // past the last capability
            throw sys_failure("prctl(PR_CAPBSET_DROP)");
        }
    }
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    data[0].effective = data[0].permitted = data[0].inheritable =
        1u << CAP_NET_BIND_SERVICE;
    if (::syscall(SYS_capset, &hdr, data) < 0) throw sys_failure("capset");
    stay_undumpable(); // a change of credentials: checked again
}

void create_sandbox(const std::string &state_dir, bool drop_caps) {
    check_resolv_conf();
    if (::unshare(CLONE_NEWNS) < 0)
        throw sys_failure("cannot unshare new mount namespace");
    mount_or_throw(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr,
                   "cannot remount / private");
    // Opened in the new namespace (bind sources must be its mounts) before
    // the tmpfs hides anything; closed before pivot_root, so no handle on
    // the old root survives.
    UniqueFd etc(::open("/etc", O_PATH | O_DIRECTORY | O_CLOEXEC));
    UniqueFd run(::open("/run", O_PATH | O_DIRECTORY | O_CLOEXEC));
    UniqueFd state(::open(state_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!etc || !state) throw sys_failure("sandbox: open /etc or " + state_dir);
    mount_or_throw("tmpfs", kNewRoot, "tmpfs", kLocked, "size=16k,mode=0755",
                   std::string("cannot mount tmpfs on ") + kNewRoot);
    std::string root = kNewRoot;
    make_dirs(root, "/etc");
    make_dirs(root, "/old");
    bind_fd(etc.get(), root + "/etc", false, "/etc");
    if (run) {
        make_dirs(root, "/run");
        bind_fd(run.get(), root + "/run", false, "/run");
    }
    // Below /run or /etc the bind above already made it read-only: mount
    // the state dir after them, on top.
    make_dirs(root, state_dir);
    bind_fd(state.get(), root + state_dir, true, state_dir);
    etc.reset();
    run.reset();
    state.reset();

    if (::chdir(root.c_str()) < 0) throw sys_failure("cannot chdir to new root");
    if (::syscall(SYS_pivot_root, ".", "old") < 0)
        throw sys_failure("cannot pivot_root to the new root");
    if (::chdir("/") < 0) throw sys_failure("cannot chdir to /");
    if (::umount2("/old", MNT_DETACH) < 0) throw sys_failure("cannot umount /old");
    if (::rmdir("/old") < 0) throw sys_failure("cannot rmdir /old");
    if (::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | kLocked,
                nullptr) < 0)
        // tmpfs remount may be refused in some set-ups; the binds are
        // read-only regardless (slirp4netns ignores this too, #163).
        std::fprintf(stderr, "sandbox: cannot remount / read-only: %s\n",
                     std::strerror(errno));
    if (drop_caps) drop_capabilities();
}

} // namespace cmd
