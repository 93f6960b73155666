// SPDX-License-Identifier: Apache-2.0

// rknp-pasta's side of the pesto protocol (pesto_server.hpp).
#include "pesto_server.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>

#include "rknp.h"

namespace pasta {

namespace {

using cmd::pesto::Change;
using cmd::pesto::Op;

std::string describe(const PestoServer::Forward &f) {
    bool v6 = f.host_addr.find(':') != std::string::npos;
    return std::string(f.proto == RKNP_PROTO_TCP ? "tcp " : "udp ") +
           (v6 ? "[" + f.host_addr + "]" : f.host_addr) + " port " +
           std::to_string(f.host_port);
}

// "port 80", or "10.89.0.2 port 80" for a target in the namespace.
std::string destination(const PestoServer::Forward &f) {
    return (f.target.empty() ? "" : f.target + " ") + "port " + std::to_string(f.guest_port);
}

} // namespace

PestoServer::PestoServer(ForwardTable &table, cmd::ForwardBackend &backend,
                         std::string guest_addr, bool ipv6, cmd::PortRange ephemeral,
                         cmd::ForwardLimits limits)
    : table_(table), backend_(backend), guest_addr_(std::move(guest_addr)), ipv6_(ipv6),
      ephemeral_(ephemeral), limits_(limits) {}

cmd::RequestState PestoServer::state(std::string_view bytes) const {
    return cmd::pesto::parse_request(bytes).state;
}

std::string PestoServer::answer(std::string_view bytes) {
    cmd::pesto::ParsedRequest req = cmd::pesto::parse_request(bytes);
    if (req.state == cmd::RequestState::Incomplete)
        req.error = "incomplete (it ends before 'end')";
    if (req.state != cmd::RequestState::Complete) {
        // Nothing at all is another start probing whether the socket is
        // live (ControlSocket), or a client that gave up: no log line.
        if (!bytes.empty())
            std::fprintf(stderr, "%s: bad request: %s\n", tag(), req.error.c_str());
        return cmd::pesto::error_reply("bad request: " + req.error);
    }
    std::string error = apply(req.changes);
    // One line a request: its first change stands for it.
    const Change &first = req.changes.front();
    std::string more;
    if (req.changes.size() > 1)
        more = " and " + std::to_string(req.changes.size() - 1) + " more";
    std::fprintf(stderr, "%s: %s %s %s%s: %s\n", tag(), cmd::pesto::op_name(first.op),
                 cmd::pesto::proto_name(first.proto), first.spec.c_str(), more.c_str(),
                 error.empty() ? "done" : error.c_str());
    return error.empty() ? cmd::pesto::ok_reply() : cmd::pesto::error_reply(error);
}

std::string PestoServer::too_large(std::string_view bytes) {
    // Hopeless bytes say why better than their size does.
    if (state(bytes) == cmd::RequestState::Invalid) return answer(bytes);
    std::fprintf(stderr, "%s: bad request: %zu bytes or more\n", tag(), max_request());
    return cmd::pesto::error_reply("bad request: " + std::to_string(max_request()) +
                                   " bytes or more");
}

std::string PestoServer::apply(const std::vector<Change> &changes) {
    std::vector<Step> steps;
    std::size_t adds = 0;
    for (const Change &c : changes)
        if (std::string e = expand(c, steps, adds); !e.empty()) return e;
    if (table_.size() + adds > limits_.max_forwards)
        return "too many forwards: " + std::to_string(table_.size()) +
               " in force and " + std::to_string(adds) + " more asked for, at most " +
               std::to_string(limits_.max_forwards);
    // Each new forward takes an fd, and the flows need the reserve more.
    int want = limits_.fd_reserve + int(adds);
    if (adds > 0)
        if (int spare = cmd::spare_fds(want); spare < want)
            return "too few file descriptors left: " + std::to_string(spare) +
                   " under RLIMIT_NOFILE, " + std::to_string(adds) +
                   " forwards need one each and " +
                   std::to_string(limits_.fd_reserve) + " stay in reserve";
    std::vector<Step> done;
    for (const Step &s : steps) {
        Step d = s;
        bool did = false;
        std::string e = run(s, d, did);
        if (!e.empty()) {
            // All or none: what this request did is undone, newest first.
            for (auto it = done.rbegin(); it != done.rend(); ++it)
                if (std::string u = undo(*it); !u.empty()) e += "; " + u;
            return e;
        }
        if (did) done.push_back(d);
    }
    return "";
}

std::string PestoServer::expand(const Change &c, std::vector<Step> &steps,
                                std::size_t &adds) const {
    const std::string option = c.proto == cmd::pesto::Proto::tcp ? "-t" : "-u";
    cmd::PortSpec spec;
    try {
        spec = cmd::parse_port_spec(c.spec, ephemeral_);
    } catch (const cmd::PortSpecError &e) {
        return option + ": " + e.what();
    }
    if (spec.mode != cmd::PortMode::list)
        return option + " " + c.spec +
               ": 'none' and 'auto' are rknp-pasta's start-up modes, not "
               "forwards to add or delete (name the ports)";
    if (!spec.ifname.empty())
        return option + " " + c.spec +
               ": binding to an interface (%IFACE) is not supported by rknp-pasta";
    const std::string target = ForwardTable::canonical(spec.target);
    std::vector<std::pair<std::string, bool>> addrs; // (address, optional)
    if (spec.address.empty()) {
        addrs.emplace_back("0.0.0.0", false);
        if (ipv6_) addrs.emplace_back("::", true);
    } else {
        addrs.emplace_back(ForwardTable::canonical(spec.address), false);
    }
    uint32_t proto = c.proto == cmd::pesto::Proto::tcp ? RKNP_PROTO_TCP : RKNP_PROTO_UDP;
    for (const cmd::PortMapping &m : spec.mappings)
        for (const auto &[addr, optional] : addrs) {
            // Bounded work and memory whatever the ranges: no request can
            // add more than the cap, nor delete more than is in force.
            if (steps.size() >= 2 * limits_.max_forwards)
                return "the request names more than " +
                       std::to_string(2 * limits_.max_forwards) +
                       " forwards (at most " + std::to_string(limits_.max_forwards) +
                       " are in force)";
            steps.push_back({c.op, {proto, addr, m.host, m.guest, 0, target}, optional});
            if (c.op == Op::add) adds++;
        }
    return "";
}

ForwardTable::Iter PestoServer::find(const Forward &f) {
    return table_.find(f.proto, f.host_addr, f.host_port);
}

std::string PestoServer::run(const Step &s, Step &done, bool &did) {
    const Forward &f = s.fwd;
    auto it = find(f);
    std::string error;
    if (s.op == Op::add) {
        if (it != table_.end())
            return describe(f) + " is forwarded already (to " + destination(*it) + ")";
        rknp_forward fwd = RKNP_FORWARD_INIT;
        fwd.protocol = f.proto;
        fwd.host_addr = f.host_addr.c_str();
        fwd.host_port = f.host_port;
        fwd.guest_port = f.guest_port;
        const std::string &to = f.target.empty() ? guest_addr_ : f.target;
        fwd.guest_addr = to.empty() ? nullptr : to.c_str();
        uint32_t id = 0;
        if (!backend_.add(fwd, id, error)) {
            // "::" next to "0.0.0.0": a host without IPv6 is fine.
            if (s.optional) return "";
            return "cannot forward " + describe(f) + " to " + destination(f) + ": " +
                   error;
        }
        Forward added = f;
        added.id = id;
        table_.add(added);
        done.fwd.id = id;
        did = true;
        return "";
    }
    if (it == table_.end()) {
        if (s.optional) return "";
        return describe(f) + " is not forwarded";
    }
    if (it->guest_port != f.guest_port || it->target != f.target)
        return describe(f) + " forwards to " + destination(*it) + ", not " +
               destination(f);
    if (!backend_.remove(it->id, error))
        return "cannot delete the forward of " + describe(f) + ": " + error;
    done.fwd.id = it->id;
    table_.erase(it);
    did = true;
    return "";
}

std::string PestoServer::undo(const Step &done) {
    std::string error;
    if (done.op == Op::add) {
        auto it = find(done.fwd);
        if (it == table_.end()) return "";
        if (!backend_.remove(it->id, error))
            return "removing the forward of " + describe(done.fwd) +
                   " again failed: " + error;
        table_.erase(it);
        return "";
    }
    Step again{Op::add, done.fwd, false};
    Step ignored = again;
    bool did = false;
    if (std::string e = run(again, ignored, did); !e.empty())
        return "restoring the forward failed: " + e;
    return "";
}

} // namespace pasta
