// SPDX-License-Identifier: Apache-2.0

// The UDP fast path's test rig: a udp::FastPath with a fake clock whose
// guest-bound frames are collected, guest datagram frames to feed it, host
// UDP sockets on loopback to talk to, the guest's ICMP port unreachable,
// and checks of what the guest gets (checksums as the guest's kernel
// verifies them, IP reassembly).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "common/fd.hpp"
#include "datapath/checksum.hpp"
#include "datapath/udp/fastpath.hpp"

namespace rknp::udptest {

using Bytes = std::vector<uint8_t>;

inline constexpr uint8_t kGuestMac[6] = {0x02, 0, 0, 0, 0, 0x64};
inline constexpr uint8_t kGuest4[4] = {10, 0, 2, 100};
inline constexpr uint8_t kGateway4[4] = {10, 0, 2, 2};

// A guest-bound frame as the tap would carry it.
struct Out {
    VnetHdr vnet{};
    Bytes frame;
};

struct Collector final : GuestSink {
    std::vector<Out> out;
    void write_frame(const VnetHdr &h, std::span<const uint8_t> f,
                     std::span<const uint8_t> rest) override {
        Bytes whole(f.begin(), f.end());
        whole.insert(whole.end(), rest.begin(), rest.end());
        out.push_back({h, std::move(whole)});
    }
};

inline void addr6(uint8_t out[16], const char *text) { inet_pton(AF_INET6, text, out); }

// An Ethernet frame of a guest datagram src:sport -> dst:dport (4-byte
// addresses for IPv4, 16 for IPv6) with a complete checksum.
inline Bytes guest_datagram(bool v6, const uint8_t *src, const uint8_t *dst,
                            uint16_t sport, uint16_t dport, std::span<const uint8_t> payload) {
    const size_t ip_len = v6 ? 40 : 20, udp_len = 8 + payload.size();
    Bytes f(14 + ip_len + udp_len);
    std::memset(f.data(), 0x52, 6);
    std::memcpy(f.data() + 6, kGuestMac, 6);
    uint8_t *ip = f.data() + 14;
    uint64_t pseudo;
    if (!v6) {
        put_be16(f.data() + 12, 0x0800);
        ip[0] = 0x45;
        put_be16(ip + 2, uint16_t(20 + udp_len));
        ip[8] = 64;
        ip[9] = 17;
        std::memcpy(ip + 12, src, 4);
        std::memcpy(ip + 16, dst, 4);
        put_be16(ip + 10, uint16_t(~csum_fold(csum_add(0, ip, 20))));
        uint8_t tail[4] = {0, 17, uint8_t(udp_len >> 8), uint8_t(udp_len)};
        pseudo = csum_add(csum_add(0, ip + 12, 8), tail, 4);
    } else {
        put_be16(f.data() + 12, 0x86dd);
        ip[0] = 0x60;
        put_be16(ip + 4, uint16_t(udp_len));
        ip[6] = 17;
        ip[7] = 64;
        std::memcpy(ip + 8, src, 16);
        std::memcpy(ip + 24, dst, 16);
        uint8_t tail[8] = {0, 0, uint8_t(udp_len >> 8), uint8_t(udp_len), 0, 0, 0, 17};
        pseudo = csum_add(csum_add(0, ip + 8, 32), tail, 8);
    }
    uint8_t *u = ip + ip_len;
    put_be16(u, sport);
    put_be16(u + 2, dport);
    put_be16(u + 4, uint16_t(udp_len));
    if (!payload.empty()) std::memcpy(u + 8, payload.data(), payload.size());
    uint16_t c = uint16_t(~csum_fold(csum_add(pseudo, u, udp_len)));
    put_be16(u + 6, c == 0 ? 0xffff : c);
    return f;
}

// The guest's ICMP port unreachable (ICMPv6 1/4) about the datagram
// remote:rport -> guest:gport of payload_len bytes it got, its headers
// quoted; checksums complete.
inline Bytes guest_port_unreachable(bool v6, const uint8_t *guest, const uint8_t *remote,
                                    uint16_t gport, uint16_t rport, size_t payload_len) {
    const size_t ip_len = v6 ? 40 : 20, icmp_len = 8 + ip_len + 8;
    Bytes f(14 + ip_len + icmp_len, 0);
    std::memset(f.data(), 0x52, 6);
    std::memcpy(f.data() + 6, kGuestMac, 6);
    uint8_t *ip = f.data() + 14, *icmp = ip + ip_len, *in = icmp + 8;
    icmp[0] = v6 ? 1 : 3;
    icmp[1] = v6 ? 4 : 3;
    if (!v6) {
        put_be16(f.data() + 12, 0x0800);
        ip[0] = in[0] = 0x45;
        put_be16(ip + 2, uint16_t(20 + icmp_len));
        put_be16(in + 2, uint16_t(20 + 8 + payload_len));
        ip[8] = in[8] = 64;
        ip[9] = 1;
        in[9] = 17;
        std::memcpy(ip + 12, guest, 4);
        std::memcpy(ip + 16, remote, 4);
        std::memcpy(in + 12, remote, 4);
        std::memcpy(in + 16, guest, 4);
        put_be16(in + 10, uint16_t(~csum_fold(csum_add(0, in, 20))));
        put_be16(ip + 10, uint16_t(~csum_fold(csum_add(0, ip, 20))));
    } else {
        put_be16(f.data() + 12, 0x86dd);
        ip[0] = in[0] = 0x60;
        put_be16(ip + 4, uint16_t(icmp_len));
        put_be16(in + 4, uint16_t(8 + payload_len));
        ip[6] = 58;
        in[6] = 17;
        ip[7] = in[7] = 64;
        std::memcpy(ip + 8, guest, 16);
        std::memcpy(ip + 24, remote, 16);
        std::memcpy(in + 8, remote, 16);
        std::memcpy(in + 24, guest, 16);
    }
    uint8_t *u = in + ip_len;
    put_be16(u, rport);
    put_be16(u + 2, gport);
    put_be16(u + 4, uint16_t(8 + payload_len));
    uint64_t sum = csum_add(0, icmp, icmp_len);
    if (v6) {
        uint8_t tail[8] = {0, 0, uint8_t(icmp_len >> 8), uint8_t(icmp_len), 0, 0, 0, 58};
        sum = csum_add(csum_add(sum, ip + 8, 32), tail, 8);
    }
    put_be16(icmp + 2, uint16_t(~csum_fold(sum)));
    return f;
}

inline Bytes pattern(size_t n, uint8_t seed) {
    Bytes b(n);
    for (size_t i = 0; i < n; ++i) b[i] = uint8_t(seed + i * 7);
    return b;
}

// A UDP socket bound to loopback (v4 or v6) on a free port.
struct HostSocket {
    UniqueFd fd;
    uint16_t port = 0;
    explicit HostSocket(bool v6) {
        fd.reset(::socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
        sockaddr_storage ss{};
        socklen_t len;
        if (v6) {
            auto &a = reinterpret_cast<sockaddr_in6 &>(ss);
            a.sin6_family = AF_INET6;
            a.sin6_addr = in6addr_loopback;
            len = sizeof a;
        } else {
            auto &a = reinterpret_cast<sockaddr_in &>(ss);
            a.sin_family = AF_INET;
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            len = sizeof a;
        }
        ::bind(fd.get(), reinterpret_cast<sockaddr *>(&ss), len);
        ::getsockname(fd.get(), reinterpret_cast<sockaddr *>(&ss), &len);
        port = ntohs(v6 ? reinterpret_cast<sockaddr_in6 &>(ss).sin6_port
                        : reinterpret_cast<sockaddr_in &>(ss).sin_port);
    }
    // Whether a datagram is queued now (sends on loopback arrive before
    // sendmsg returns).
    bool has_datagram() const {
        pollfd p{fd.get(), POLLIN, 0};
        return ::poll(&p, 1, 0) == 1;
    }
    // The next datagram (waits up to 2 s) and who sent it.
    std::optional<Bytes> recv(sockaddr_storage *from = nullptr) {
        pollfd p{fd.get(), POLLIN, 0};
        if (::poll(&p, 1, 2000) != 1) return std::nullopt;
        Bytes b(65536);
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        ssize_t n = ::recvfrom(fd.get(), b.data(), b.size(), 0,
                               reinterpret_cast<sockaddr *>(&ss), &len);
        if (n < 0) return std::nullopt;
        b.resize(size_t(n));
        if (from) *from = ss;
        return b;
    }
    void reply(const sockaddr_storage &to, std::span<const uint8_t> data) {
        socklen_t len = to.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
        ::sendto(fd.get(), data.data(), data.size(), 0,
                 reinterpret_cast<const sockaddr *>(&to), len);
    }
};

struct Rig {
    int64_t now = 1000;
    Collector guest;
    udp::FastPath path;

    static udp::FastPathConfig config(uint32_t mtu, bool segmentation) {
        udp::FastPathConfig c;
        c.ipv6 = true;
        addr6(c.prefix6.s6_addr, "fd00::");
        addr6(c.gateway6.s6_addr, "fd00::2");
        addr6(c.dns6.s6_addr, "fd00::3");
        c.mtu = mtu;
        c.max_flows = 64;
        c.segmentation = segmentation;
        return c;
    }
    explicit Rig(uint32_t mtu = 65520, bool segmentation = true,
                 std::function<Admission()> admit = {})
        : path(with_clock(config(mtu, segmentation), std::move(admit)), guest) {}

    udp::FastPathConfig with_clock(udp::FastPathConfig c, std::function<Admission()> admit) {
        c.clock = [this] { return now; };
        c.admit_flow = std::move(admit);
        return c;
    }

    // Waits until the path's epoll set is readable, then services it.
    bool poll_host(int ms = 2000) {
        pollfd p{path.epoll_fd(), POLLIN, 0};
        if (::poll(&p, 1, ms) != 1) return false;
        path.poll_events();
        return true;
    }
};

// The frame as the guest's kernel sees it once a partial checksum is done.
inline Bytes completed(const Out &o) {
    Bytes f = o.frame;
    if (o.vnet.flags & kVnetNeedsCsum) {
        size_t start = o.vnet.csum_start, field = start + o.vnet.csum_offset;
        uint16_t sum = csum_fold(csum_add(0, f.data() + start, f.size() - start));
        put_be16(f.data() + field, uint16_t(~sum));
    }
    return f;
}

// Whether the UDP (or ICMP/ICMPv6: proto) checksum of a whole IP datagram
// (l3: the IP header, l4 its payload) verifies.
inline bool l4_checksum_ok(bool v6, const uint8_t *ip, std::span<const uint8_t> l4,
                           uint8_t proto) {
    uint64_t sum = csum_add(0, l4.data(), l4.size());
    if (v6) {
        uint8_t tail[8] = {0, 0, uint8_t(l4.size() >> 8), uint8_t(l4.size()), 0, 0, 0, proto};
        sum = csum_add(csum_add(sum, ip + 8, 32), tail, 8);
    } else if (proto == 17) {
        uint8_t tail[4] = {0, proto, uint8_t(l4.size() >> 8), uint8_t(l4.size())};
        sum = csum_add(csum_add(sum, ip + 12, 8), tail, 4);
    }
    return csum_fold(sum) == 0xffff;
}

} // namespace rknp::udptest
