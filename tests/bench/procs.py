# SPDX-License-Identifier: Apache-2.0

"""/proc readers: process tree, CPU time, peak RSS."""
import os

TICK = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid):
    with open("/proc/%d/stat" % pid) as f:
        data = f.read()
    # comm may contain spaces: fields after the closing parenthesis.
    return data[data.rindex(")") + 2:].split()


def cpu_seconds(pid):
    """utime + stime of the whole process (all threads), in seconds."""
    f = _stat_fields(pid)
    return (int(f[11]) + int(f[12])) / TICK


def vm_hwm_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None


def all_procs():
    """{pid: (ppid, uid, comm, exe basename)} of every visible process."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        pid = int(d)
        try:
            f = _stat_fields(pid)
            with open("/proc/%d/comm" % pid) as fc:
                comm = fc.read().strip()
            uid = os.stat("/proc/%d" % pid).st_uid
            try:
                exe = os.path.basename(os.readlink("/proc/%d/exe" % pid))
            except OSError:
                exe = ""
            out[pid] = (int(f[1]), uid, comm, exe)
        except (OSError, ValueError):
            continue
    return out


def descendants(root, procs):
    """pids below root, breadth first (parents before children)."""
    kids = {}
    for pid, info in procs.items():
        kids.setdefault(info[0], []).append(pid)
    order, queue = [], [root]
    while queue:
        p = queue.pop(0)
        for c in sorted(kids.get(p, [])):
            order.append(c)
            queue.append(c)
    return order


def find_stack(root, uid, helper_names, parent_name):
    """Returns {"parent": pid, "helper": pid} as far as found.

    parent: the topmost descendant of root whose exe/comm is parent_name
    (rootlesskit's parent process). helper: a process named in helper_names,
    below root, or anywhere owned by uid (pasta daemonizes away from its
    parent).
    """
    procs = all_procs()
    found = {}
    tree = descendants(root, procs)
    for pid in tree:
        _, _, comm, exe = procs[pid]
        if parent_name and "parent" not in found and parent_name in (comm, exe):
            found["parent"] = pid
        if helper_names and "helper" not in found and \
                (comm in helper_names or exe in helper_names):
            found["helper"] = pid
    if helper_names and "helper" not in found:
        # Daemonized: take the one whose last argument is a pid in our tree
        # (pasta's target), else the newest one of uid.
        mine = {str(p) for p in tree}
        for pid, (_, puid, comm, exe) in sorted(procs.items()):
            if puid == uid and (comm in helper_names or exe in helper_names):
                if _last_arg(pid) in mine:
                    found["helper"] = pid
                    break
                found["helper"] = pid
    return found


def _last_arg(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            args = f.read().rstrip(b"\0").split(b"\0")
        return args[-1].decode()
    except OSError:
        return ""
