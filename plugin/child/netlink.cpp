// SPDX-License-Identifier: Apache-2.0

// Netlink (libnl) requests that configure links, addresses and routes.
#include "child/netlink.hpp"

#include <linux/if_addr.h>
#include <net/if.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/route.h>

#include "common/error.hpp"

namespace rknp {

namespace {

template <typename T, void (*Free)(T *)> struct Deleter {
    void operator()(T *p) const { Free(p); }
};
using LinkPtr = std::unique_ptr<rtnl_link, Deleter<rtnl_link, rtnl_link_put>>;
using AddrPtr = std::unique_ptr<rtnl_addr, Deleter<rtnl_addr, rtnl_addr_put>>;
using RoutePtr =
    std::unique_ptr<rtnl_route, Deleter<rtnl_route, rtnl_route_put>>;
using NlAddrPtr = std::unique_ptr<nl_addr, Deleter<nl_addr, nl_addr_put>>;

void check(int rc, const std::string &what) {
    if (rc < 0)
        throw Error(rc == -NLE_PERM ? RKNP_ERR_PERMISSION : RKNP_ERR_SYSTEM,
                    "netlink: " + what + ": " + nl_geterror(rc));
}

NlAddrPtr build(int family, const void *bytes, uint32_t prefix_len) {
    size_t len = family == AF_INET ? 4 : family == AF_INET6 ? 16 : 6;
    NlAddrPtr a(nl_addr_build(family, bytes, len));
    if (!a) throw Error(RKNP_ERR_SYSTEM, "netlink: out of memory");
    if (family != AF_LLC) nl_addr_set_prefixlen(a.get(), int(prefix_len));
    return a;
}

} // namespace

Netlink::Netlink() : sock_(nl_socket_alloc()) {
    if (sock_ == nullptr) throw Error(RKNP_ERR_SYSTEM, "netlink: out of memory");
    int rc = nl_connect(sock_, NETLINK_ROUTE);
    if (rc < 0) {
        nl_socket_free(sock_);
        sock_ = nullptr;
        check(rc, "connect");
    }
}

Netlink::~Netlink() {
    if (sock_ != nullptr) nl_socket_free(sock_);
}

int Netlink::ifindex(const std::string &ifname) {
    rtnl_link *raw = nullptr;
    check(rtnl_link_get_kernel(sock_, 0, ifname.c_str(), &raw),
          "find link " + ifname);
    LinkPtr link(raw);
    return rtnl_link_get_ifindex(link.get());
}

void Netlink::link_up(const std::string &ifname, std::optional<uint32_t> mtu,
                      std::optional<uint32_t> txqlen,
                      const std::optional<Mac> &mac) {
    rtnl_link *raw = nullptr;
    check(rtnl_link_get_kernel(sock_, 0, ifname.c_str(), &raw),
          "find link " + ifname);
    LinkPtr link(raw);
    LinkPtr change(rtnl_link_alloc());
    if (!change) throw Error(RKNP_ERR_SYSTEM, "netlink: out of memory");
    rtnl_link_set_flags(change.get(), IFF_UP);
    if (mtu) rtnl_link_set_mtu(change.get(), *mtu);
    if (txqlen) rtnl_link_set_txqlen(change.get(), *txqlen);
    NlAddrPtr lladdr;
    if (mac) {
        lladdr = build(AF_LLC, mac->data(), 0);
        rtnl_link_set_addr(change.get(), lladdr.get());
    }
    check(rtnl_link_change(sock_, link.get(), change.get(), 0),
          "configure link " + ifname);
}

void Netlink::add_address(int ifindex, int family, const void *addr,
                          uint32_t prefix_len, bool nodad) {
    AddrPtr a(rtnl_addr_alloc());
    if (!a) throw Error(RKNP_ERR_SYSTEM, "netlink: out of memory");
    NlAddrPtr local = build(family, addr, prefix_len);
    rtnl_addr_set_ifindex(a.get(), ifindex);
    check(rtnl_addr_set_local(a.get(), local.get()), "set local address");
    rtnl_addr_set_prefixlen(a.get(), int(prefix_len));
    if (nodad) rtnl_addr_set_flags(a.get(), IFA_F_NODAD);
    char buf[64];
    check(rtnl_addr_add(sock_, a.get(), 0),
          std::string("add address ") +
              nl_addr2str(local.get(), buf, sizeof buf));
}

void Netlink::add_default_route(int ifindex, int family, const void *gateway) {
    RoutePtr r(rtnl_route_alloc());
    if (!r) throw Error(RKNP_ERR_SYSTEM, "netlink: out of memory");
    const uint8_t zero[16] = {};
    NlAddrPtr dst = build(family, zero, 0);
    NlAddrPtr gw = build(family, gateway, family == AF_INET ? 32 : 128);
    rtnl_route_set_family(r.get(), uint8_t(family));
    check(rtnl_route_set_dst(r.get(), dst.get()), "set route destination");
    rtnl_route_set_table(r.get(), RT_TABLE_MAIN);
    rtnl_route_set_scope(r.get(), RT_SCOPE_UNIVERSE);
    rtnl_route_set_protocol(r.get(), RTPROT_BOOT);
    rtnl_nexthop *nh = rtnl_route_nh_alloc(); // owned by r once added
    if (nh == nullptr) throw Error(RKNP_ERR_SYSTEM, "netlink: out of memory");
    rtnl_route_nh_set_ifindex(nh, ifindex);
    rtnl_route_nh_set_gateway(nh, gw.get());
    rtnl_route_add_nexthop(r.get(), nh);
    char buf[64];
    check(rtnl_route_add(sock_, r.get(), NLM_F_CREATE),
          std::string("add default route via ") +
              nl_addr2str(gw.get(), buf, sizeof buf));
}

} // namespace rknp
