// SPDX-License-Identifier: Apache-2.0

// ICMP and ICMPv6 errors about a UDP datagram, sent from a raw socket to
// the erring socket's loopback address as a router on the path would send
// them, so that the kernel leaves the error on a connected socket (its
// pending error and error queue). For unit cases in a network namespace of
// their own (own_netns.hpp: root, nothing leaves it).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "datapath/checksum.hpp"

namespace rknp::testicmp {

// An error of type/code with info (bytes 4-7: the MTU of a "too big")
// about the datagram of payload_len bytes local -> remote (the erring
// socket's address and its peer's, both IPv4 or both IPv6), quoting its
// IP and UDP headers and quoted of its payload bytes (zeros). True if
// sent.
inline bool send_error(uint8_t type, uint8_t code, uint32_t info, const sockaddr_storage &local,
                       const sockaddr_storage &remote, size_t payload_len, size_t quoted = 0) {
    const bool v6 = local.ss_family == AF_INET6;
    const size_t inner_ip = v6 ? 40 : 20;
    std::vector<uint8_t> m(8 + inner_ip + 8 + quoted, 0);
    m[0] = type;
    m[1] = code;
    put_be16(m.data() + 4, uint16_t(info >> 16));
    put_be16(m.data() + 6, uint16_t(info));
    uint8_t *ip = m.data() + 8;
    uint16_t sport, dport;
    if (v6) {
        const auto &l = reinterpret_cast<const sockaddr_in6 &>(local);
        const auto &r = reinterpret_cast<const sockaddr_in6 &>(remote);
        ip[0] = 0x60;
        put_be16(ip + 4, uint16_t(8 + payload_len));
        ip[6] = 17;
        ip[7] = 64;
        std::memcpy(ip + 8, &l.sin6_addr, 16);
        std::memcpy(ip + 24, &r.sin6_addr, 16);
        sport = ntohs(l.sin6_port);
        dport = ntohs(r.sin6_port);
    } else {
        const auto &l = reinterpret_cast<const sockaddr_in &>(local);
        const auto &r = reinterpret_cast<const sockaddr_in &>(remote);
        ip[0] = 0x45;
        put_be16(ip + 2, uint16_t(20 + 8 + payload_len));
        put_be16(ip + 6, 0x4000); // DF
        ip[8] = 64;
        ip[9] = 17;
        std::memcpy(ip + 12, &l.sin_addr, 4);
        std::memcpy(ip + 16, &r.sin_addr, 4);
        put_be16(ip + 10, uint16_t(~csum_fold(csum_add(0, ip, 20))));
        sport = ntohs(l.sin_port);
        dport = ntohs(r.sin_port);
    }
    uint8_t *udp = ip + inner_ip;
    put_be16(udp, sport);
    put_be16(udp + 2, dport);
    put_be16(udp + 4, uint16_t(8 + payload_len));
    // ICMPv6 raw sockets have the kernel fill in the checksum.
    if (!v6) put_be16(m.data() + 2, uint16_t(~csum_fold(csum_add(0, m.data(), m.size()))));
    const int s = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_RAW | SOCK_CLOEXEC,
                           v6 ? int(IPPROTO_ICMPV6) : int(IPPROTO_ICMP));
    if (s < 0) return false;
    // To the erring socket's own address, from the same (loopback).
    sockaddr_storage to = local;
    if (v6)
        reinterpret_cast<sockaddr_in6 &>(to).sin6_port = 0;
    else
        reinterpret_cast<sockaddr_in &>(to).sin_port = 0;
    const ssize_t n = ::sendto(s, m.data(), m.size(), 0, reinterpret_cast<sockaddr *>(&to),
                               v6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
    ::close(s);
    return n == ssize_t(m.size());
}

// A socket's own address.
inline sockaddr_storage local_of(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ::getsockname(fd, reinterpret_cast<sockaddr *>(&ss), &len);
    return ss;
}

} // namespace rknp::testicmp
