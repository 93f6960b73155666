// SPDX-License-Identifier: Apache-2.0

// pasta's -t/-u forwards on an rknp parent (see port_forwarder.hpp).
#include "port_forwarder.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdio>
#include <set>

#include "cmd/common/errors.hpp"
#include "cmd/common/forward_backend.hpp"
#include "proc_net.hpp"

namespace pasta {

void parse_port_option(const std::vector<std::string> &specs, const char *option,
                       PortRange eph, std::vector<PortSpec> &lists, bool &automatic) {
    bool none = false;
    for (const auto &s : specs) {
        PortSpec spec;
        try {
            spec = cmd::parse_port_spec(s, eph);
        } catch (const cmd::PortSpecError &e) {
            throw cmd::Failure(std::string(option) + ": " + e.what());
        }
        if (!spec.ifname.empty())
            throw cmd::Failure(std::string(option) + " " + s +
                               ": binding to an interface (%IFACE) is not "
                               "supported by rknp-pasta");
        switch (spec.mode) {
        case PortMode::none:
            none = true;
            break;
        case PortMode::automatic:
            automatic = true;
            break;
        case PortMode::list:
            lists.push_back(std::move(spec));
            break;
        }
    }
    if (none && (automatic || !lists.empty()))
        throw cmd::Failure(std::string(option) +
                           ": 'none' cannot be combined with other specs");
}

PortForwarder::PortForwarder(const Options &o, bool ipv6, ForwardTable &table)
    : ipv6_(ipv6), lo_to_lo_(o.host_lo_to_ns_lo), table_(table) {
    // Not given: pasta's default for -t and -u, "auto". "~N" specs leave
    // out the host's ephemeral range.
    const PortRange eph = cmd::host_ephemeral_range();
    tcp_.automatic = o.tcp.empty();
    udp_.automatic = o.udp.empty();
    parse_port_option(o.tcp, "-t/--tcp-ports", eph, tcp_.lists, tcp_.automatic);
    parse_port_option(o.udp, "-u/--udp-ports", eph, udp_.lists, udp_.automatic);
    // /proc/thread-self/net/... is the netns of the thread that opens it.
    const char *base = "/proc/thread-self/net/";
    for (const Kind *k : {&tcp_, &udp_}) {
        if (!k->automatic) continue;
        const char *name = k->proto == RKNP_PROTO_TCP ? "tcp" : "udp";
        scan_.push_back({k->proto, std::string(base) + name, {}});
        scan_.push_back({k->proto, std::string(base) + name + "6", {}});
    }
}

std::vector<std::string> PortForwarder::netns_files() const {
    std::vector<std::string> paths;
    for (const auto &s : scan_) paths.push_back(s.path);
    return paths;
}

void PortForwarder::set_netns_files(std::vector<cmd::UniqueFd> fds) {
    if (fds.size() != scan_.size())
        throw cmd::Failure("wrong number of /proc/net files");
    for (size_t i = 0; i < fds.size(); i++) scan_[i].fd = std::move(fds[i]);
}

bool PortForwarder::add(cmd::ForwardBackend &fw, uint32_t proto,
                        const std::string &host_addr, uint16_t host_port,
                        uint16_t guest_port, const std::string &target, uint32_t &id,
                        std::string &error) {
    rknp_forward fwd = RKNP_FORWARD_INIT;
    fwd.protocol = proto;
    fwd.host_addr = host_addr.c_str();
    fwd.host_port = host_port;
    fwd.guest_port = guest_port;
    fwd.guest_addr = target.empty() ? nullptr : target.c_str();
    if (!fw.add(fwd, id, error)) return false;
    table_.add({proto, ForwardTable::canonical(host_addr), host_port, guest_port, id,
                ForwardTable::canonical(target)});
    return true;
}

void PortForwarder::bind_explicit(cmd::ForwardBackend &fw) {
    for (const Kind *k : {&tcp_, &udp_}) {
        const char *option = k->proto == RKNP_PROTO_TCP ? "-t" : "-u";
        for (const auto &spec : k->lists) {
            std::vector<std::string> addrs;
            if (!spec.address.empty())
                addrs.push_back(spec.address);
            else {
                addrs.push_back("0.0.0.0");
                if (ipv6_) addrs.push_back("::");
            }
            for (const auto &m : spec.mappings) {
                for (size_t i = 0; i < addrs.size(); i++) {
                    uint32_t id = 0;
                    std::string error;
                    if (add(fw, k->proto, addrs[i], m.host, m.guest, spec.target, id, error))
                        continue;
                    // "::" next to "0.0.0.0": a host without IPv6 is fine.
                    if (spec.address.empty() && i > 0) continue;
                    throw cmd::Failure(std::string(option) + ": cannot forward " +
                                       addrs[i] + " port " +
                                       std::to_string(m.host) + " to " +
                                       std::to_string(m.guest) + ": " + error);
                }
            }
        }
    }
}

bool PortForwarder::rescan(cmd::ForwardBackend &fw, LoopbackRelay &relay) {
    std::set<std::pair<uint32_t, unsigned>> want, lo;
    for (auto &s : scan_) {
        if (!read_proc_net(s.fd.get(), text_)) return false;
        SocketKind kind = s.proto == RKNP_PROTO_TCP ? SocketKind::tcp : SocketKind::udp;
        for (unsigned port : listening_ports(text_, kind)) want.insert({s.proto, port});
        if (lo_to_lo_)
            for (unsigned port : loopback_ports(text_, kind)) lo.insert({s.proto, port});
    }
    if (lo_to_lo_) {
        for (const auto &key : want) lo.erase(key); // reached through the tap
        relay_loopback_only(lo, relay);
    }
    for (auto it = auto_.begin(); it != auto_.end();) {
        if (want.count(it->first)) {
            ++it;
            continue;
        }
        for (uint32_t id : it->second) {
            if (!table_.has(id)) continue; // deleted through rknp-pesto
            table_.erase_id(id);
            std::string error;
            fw.remove(id, error);
        }
        it = auto_.erase(it);
    }
    for (const auto &key : want) {
        if (auto_.count(key)) continue;
        std::vector<uint32_t> ids;
        for (const char *addr : {"0.0.0.0", "::"}) {
            if (addr[0] == ':' && !ipv6_) continue;
            uint32_t id = 0;
            std::string error;
            // A port the host cannot bind (in use, privileged, or an
            // explicit forward already) stays unforwarded, as in pasta.
            if (add(fw, key.first, addr, uint16_t(key.second), uint16_t(key.second), "",
                    id, error))
                ids.push_back(id);
        }
        auto_[key] = std::move(ids); // tried once, even if nothing bound
    }
    return true;
}

void PortForwarder::relay_loopback_only(const std::set<std::pair<uint32_t, unsigned>> &lo,
                                        LoopbackRelay &relay) {
    auto ip_proto = [](uint32_t proto) {
        return proto == RKNP_PROTO_TCP ? IPPROTO_TCP : IPPROTO_UDP;
    };
    for (auto it = lo_.begin(); it != lo_.end();) {
        if (lo.count(it->first)) {
            ++it;
            continue;
        }
        if (it->second)
            relay.remove(ip_proto(it->first.first), uint16_t(it->first.second),
                         LoopbackRelay::Listen::on_host);
        it = lo_.erase(it);
    }
    for (const auto &key : lo) {
        if (lo_.count(key)) continue;
        const int proto = ip_proto(key.first);
        const uint16_t port = uint16_t(key.second);
        // -T/-U's own listener on the namespace's loopback: the host's
        // port is the one it reaches already.
        if (relay.listens(proto, port, LoopbackRelay::Listen::in_ns)) continue;
        bool any = false;
        for (int family : {AF_INET, AF_INET6}) {
            if (family == AF_INET6 && !ipv6_) continue;
            std::string error;
            int err = 0;
            // A host port in use stays the host's, as with "auto".
            any |= relay.add(proto, family, port, port, error, err,
                             LoopbackRelay::Listen::on_host);
        }
        lo_[key] = any; // tried once, until the namespace stops listening
    }
}

} // namespace pasta
