// SPDX-License-Identifier: Apache-2.0

// The target's namespaces (a PID's, or paths) and entering them with
// setns(2), as slirp4netns and pasta do, without letting the target's
// processes reach back into this one.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>


namespace cmd {

struct TargetNamespaces {
    std::optional<std::string> userns; // none: stay in the caller's
    std::string netns;
};

// /proc/PID/ns/{user,net} (pid > 0), or the paths given on the command
// line, each overriding its PID's.
TargetNamespaces target_namespaces(pid_t pid,
                                   const std::optional<std::string> &netns_path,
                                   const std::optional<std::string> &userns_path);

// Marks the process non-dumpable (PR_SET_DUMPABLE 0) and checks it took.
// A process that joins a user namespace the container owns passes the
// kernel's ptrace uid check from inside it (container root is the same
// user): only a non-dumpable mm makes /proc/PID/{root,environ,mem} and
// PTRACE_ATTACH need CAP_SYS_PTRACE in the host's user namespace. main()
// calls it first; the functions below call it again after every change
// of credentials, since commit_creds may reset the flag. Throws Failure.
void stay_undumpable();

// Enters the user namespace (a failure there is not fatal, as in
// slirp4netns: the caller may already be in it) and then the network
// namespace. Only for a single-threaded process. Throws Failure.
void enter_user_and_net(const TargetNamespaces &ns);

// Enters only the user namespace and becomes uid/gid 0 in it (the sandbox
// needs CAP_SYS_ADMIN there). Single-threaded only. Throws Failure.
void enter_user_as_root(const std::string &userns);

} // namespace cmd
