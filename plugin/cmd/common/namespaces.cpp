// SPDX-License-Identifier: Apache-2.0

// The target's namespaces (a PID's, or paths) and entering them with
// setns(2), as slirp4netns and pasta do, without letting the target's
// processes reach back into this one.
#include "namespaces.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "errors.hpp"
#include "unique_fd.hpp"

namespace cmd {

TargetNamespaces target_namespaces(pid_t pid,
                                   const std::optional<std::string> &netns_path,
                                   const std::optional<std::string> &userns_path) {
    TargetNamespaces ns;
    std::string proc = "/proc/" + std::to_string(pid) + "/ns/";
    ns.netns = netns_path ? *netns_path : proc + "net";
    if (userns_path)
        ns.userns = *userns_path;
    else if (pid > 0)
        ns.userns = proc + "user";
    return ns;
}

namespace {

UniqueFd open_ns(const std::string &path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) throw sys_failure(path);
    return fd;
}

} // namespace

void stay_undumpable() {
    if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        throw sys_failure("prctl(PR_SET_DUMPABLE, 0)");
    if (::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
        throw Failure("the process is still dumpable");
}

void enter_user_and_net(const TargetNamespaces &ns) {
    stay_undumpable();
    UniqueFd net = open_ns(ns.netns);
    UniqueFd user;
    if (ns.userns) user = open_ns(*ns.userns);
    // EINVAL: already in it (or the caller owns the netns anyway); a real
    // lack of privilege shows up as the netns setns failing below.
    if (user && ::setns(user.get(), CLONE_NEWUSER) < 0 && errno != EINVAL)
        std::fprintf(stderr, "%s: setns(CLONE_NEWUSER, %s): %s\n",
                     program_invocation_short_name, ns.userns->c_str(), std::strerror(errno));
    if (::setns(net.get(), CLONE_NEWNET) < 0)
        throw sys_failure("setns(CLONE_NEWNET, " + ns.netns + ")");
    stay_undumpable();
}

void enter_user_as_root(const std::string &userns) {
    stay_undumpable();
    UniqueFd user = open_ns(userns);
    if (::setns(user.get(), CLONE_NEWUSER) < 0)
        throw sys_failure("setns(CLONE_NEWUSER, " + userns + ")");
    if (::setegid(0) < 0) throw sys_failure("setegid(0)");
    if (::seteuid(0) < 0) throw sys_failure("seteuid(0)");
    stay_undumpable();
}

} // namespace cmd
