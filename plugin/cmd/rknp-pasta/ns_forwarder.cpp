// SPDX-License-Identifier: Apache-2.0

// pasta's -T/-U on a LoopbackRelay (see ns_forwarder.hpp).
#include "ns_forwarder.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "cmd/common/errors.hpp"
#include "port_forwarder.hpp"
#include "proc_net.hpp"
#include "rknp.h"

namespace pasta {

namespace {

void parse_kind(const std::vector<std::string> &specs, const char *option,
                cmd::PortRange eph, std::vector<cmd::PortSpec> &lists, bool &automatic) {
    parse_port_option(specs, option, eph, lists, automatic);
    // The namespace's side is its loopback: an address may only say which.
    for (const auto &spec : lists)
        if (!spec.address.empty() && spec.address != "127.0.0.1" && spec.address != "::1")
            throw cmd::Failure(std::string(option) + ": address " + spec.address +
                               ": the namespace's side is its loopback: the "
                               "address may be 127.0.0.1 or ::1 only");
    // And the host's: no target address.
    for (const auto &spec : lists)
        if (!spec.target.empty())
            throw cmd::Failure(std::string(option) + ": target " + spec.target +
                               ": the host's side is its loopback: a target "
                               "address is not supported");
}

} // namespace

NsForwarder::NsForwarder(const Options &o, bool ipv6)
    : ipv6_(ipv6), ephemeral_(cmd::host_ephemeral_range()) {
    parse_kind(o.tcp_ns, tcp_.option, ephemeral_, tcp_.lists, tcp_.automatic);
    parse_kind(o.udp_ns, udp_.option, ephemeral_, udp_.lists, udp_.automatic);
    std::size_t sockets = 0;
    for (const Kind *k : {&tcp_, &udp_})
        for (const auto &spec : k->lists) sockets += spec.mappings.size() * families(spec).size();
    if (sockets > LoopbackRelay::kMaxListeners)
        throw cmd::Failure("-T/-U: " + std::to_string(sockets) +
                           " listening sockets asked for, more than rknp-pasta's " +
                           std::to_string(LoopbackRelay::kMaxListeners));
    // /proc/thread-self/net/... is the namespace of the thread that opens it.
    for (const Kind *k : {&tcp_, &udp_}) {
        if (!k->automatic) continue;
        std::string base = k->proto == IPPROTO_TCP ? "/proc/thread-self/net/tcp"
                                                   : "/proc/thread-self/net/udp";
        scan_.push_back({k->proto, base, {}});
        if (ipv6_) scan_.push_back({k->proto, base + "6", {}});
    }
}

bool NsForwarder::active() const {
    return tcp_.automatic || udp_.automatic || !tcp_.lists.empty() || !udp_.lists.empty();
}

std::vector<int> NsForwarder::families(const cmd::PortSpec &spec) const {
    if (spec.address == "127.0.0.1") return {AF_INET};
    if (spec.address == "::1") return {AF_INET6};
    if (ipv6_) return {AF_INET, AF_INET6};
    return {AF_INET};
}

void NsForwarder::open_host_files() {
    for (auto &s : scan_) {
        s.fd.reset(::open(s.path.c_str(), O_RDONLY | O_CLOEXEC));
        if (!s.fd) throw cmd::sys_failure("-T/-U auto: open " + s.path);
    }
}

void NsForwarder::bind_explicit(LoopbackRelay &relay) {
    for (const Kind *k : {&tcp_, &udp_}) {
        for (const auto &spec : k->lists) {
            const std::vector<int> fams = families(spec);
            for (const auto &m : spec.mappings) {
                for (int family : fams) {
                    std::string error;
                    int err = 0;
                    if (relay.add(k->proto, family, m.host, m.guest, error, err)) continue;
                    // ::1 next to 127.0.0.1: a namespace without IPv6 on
                    // its loopback is fine.
                    if (spec.address.empty() && family == AF_INET6 &&
                        (err == EADDRNOTAVAIL || err == EAFNOSUPPORT))
                        continue;
                    throw cmd::Failure(std::string(k->option) + ": cannot listen on the "
                                       "namespace's " +
                                       (family == AF_INET ? "127.0.0.1" : "::1") +
                                       " port " + std::to_string(m.host) + ": " + error);
                }
            }
        }
    }
}

bool NsForwarder::rescan(LoopbackRelay &relay, const ForwardTable &own) {
    std::set<std::pair<int, unsigned>> want;
    for (auto &s : scan_) {
        if (!read_proc_net(s.fd.get(), text_)) return false;
        SocketKind kind = s.proto == IPPROTO_TCP ? SocketKind::tcp : SocketKind::udp;
        for (unsigned port : loopback_reachable_ports(text_, kind)) {
            if (s.proto == IPPROTO_UDP && port >= ephemeral_.first && port <= ephemeral_.last)
                continue;
            want.insert({s.proto, port});
        }
    }
    // rknp-pasta's own forwards' host sockets are in the host's files too.
    for (const auto &f : own.all())
        want.erase({f.proto == RKNP_PROTO_TCP ? IPPROTO_TCP : IPPROTO_UDP,
                    f.host_port});
    for (auto it = auto_.begin(); it != auto_.end();) {
        if (want.count(it->first)) {
            ++it;
            continue;
        }
        if (it->second) relay.remove(it->first.first, uint16_t(it->first.second));
        it = auto_.erase(it);
    }
    for (const auto &key : want) {
        if (auto_.count(key)) continue;
        // An explicit -T/-U port keeps its own mapping; a port relayed the
        // other way (--host-lo-to-ns-lo) is the namespace's own.
        if (relay.listens(key.first, uint16_t(key.second)) ||
            relay.listens(key.first, uint16_t(key.second), LoopbackRelay::Listen::on_host))
            continue;
        bool any = false;
        for (int family : {AF_INET, AF_INET6}) {
            if (family == AF_INET6 && !ipv6_) continue;
            std::string error;
            int err = 0;
            // A port the namespace uses itself stays its own, as in pasta.
            any |= relay.add(key.first, family, uint16_t(key.second), uint16_t(key.second),
                             error, err);
        }
        auto_[key] = any;
    }
    return true;
}

} // namespace pasta
