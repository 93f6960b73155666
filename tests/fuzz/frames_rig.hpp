// SPDX-License-Identifier: Apache-2.0

// The frames fuzz target's instruments around the stack it drives: the
// check of every guest-bound frame (OutputCheck), the host's echo peers of
// guest TCP (HostPeers) and the guest's view of the sequence numbers the
// stack sends (SentSeqs, for the ack fix-up). See target_frames.cpp.
#pragma once

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <span>
#include <vector>

#include "datapath/checksum.hpp"
#include "datapath/guest_sink.hpp"
#include "datapath/offload.hpp"
#include "datapath/tcp/frame.hpp"
#include "fuzz_input.hpp"

namespace fuzz::frames {

using namespace rknp;

// Accounts for the frames a Coalescer (or the fast path) emits and checks
// every frame with a partial checksum (merged or not).
struct OutputCheck final : GuestSink {
    uint64_t bytes_in = 0, bytes_out = 0;

    void write_frame(const VnetHdr &h, std::span<const uint8_t> head,
                     std::span<const uint8_t> rest) override {
        std::vector<uint8_t> f(head.begin(), head.end());
        f.insert(f.end(), rest.begin(), rest.end());
        if (h.gso_type == 0 && h.flags == 0) {
            bytes_out += f.size();
            return;
        }
        fuzz::require(h.flags == kVnetNeedsCsum, "flags other than NEEDS_CSUM");
        // The fast path's control frames are all headers: hdr_len == size.
        fuzz::require(h.hdr_len <= f.size() && f.size() <= 14 + 65535,
                      "partial-checksum frame sizes");
        bool v6;
        if (h.gso_type == 0) { // one segment with a partial checksum
            v6 = be16(f.data() + 12) == 0x86dd;
            bytes_out += f.size();
        } else {
            fuzz::require(h.gso_type == kVnetGsoTcp4 || h.gso_type == kVnetGsoTcp6,
                          "unknown gso type");
            fuzz::require(h.gso_size > 0 && h.hdr_len < f.size(),
                          "gso frame without gso_size or payload");
            size_t payload = f.size() - h.hdr_len;
            size_t segs = (payload + h.gso_size - 1) / h.gso_size;
            fuzz::require(segs >= 2, "gso frame of one segment");
            bytes_out += f.size() + (segs - 1) * h.hdr_len;
            v6 = h.gso_type == kVnetGsoTcp6;
        }
        // The IP length must cover the frame, and completing the partial
        // checksum must give a valid TCP (or, the UDP fast path's, UDP)
        // checksum.
        size_t ip_len = v6 ? 40 + be16(f.data() + 18) : be16(f.data() + 16);
        fuzz::require(14 + ip_len == f.size(), "IP length of merged frame");
        const uint8_t proto = v6 ? f[20] : f[23];
        fuzz::require(proto == kProtoTcp || (proto == kProtoUdp && h.gso_type == 0),
                      "partial checksum of another protocol");
        std::vector<uint8_t> copy(f.begin(), f.end());
        fuzz::require(complete_checksum(copy, h), "merged frame csum offsets");
        size_t l4 = h.csum_start, l4_len = copy.size() - l4;
        uint64_t sum = v6 ? csum_add(0, copy.data() + 22, 32)
                          : csum_add(0, copy.data() + 26, 8);
        uint8_t tail[8] = {0, 0, uint8_t(l4_len >> 8), uint8_t(l4_len), 0, 0, 0, proto};
        sum = v6 ? csum_add(sum, tail, 8) : csum_add(sum, tail + 2, 2) ;
        if (!v6) {
            uint8_t proto_field[2] = {0, proto};
            sum = csum_add(sum, proto_field, 2);
            // Rebuilt for merged frames (a single one keeps its header).
            if (h.gso_type != 0)
                fuzz::require(csum_fold(csum_add(0, copy.data() + 14, 20)) == 0xffff,
                              "IPv4 header checksum of merged frame");
        }
        sum = csum_add(sum, copy.data() + l4, l4_len);
        fuzz::require(csum_fold(sum) == 0xffff, "L4 checksum of merged frame");
    }
};

// The host side of guest TCP and UDP: listeners and UDP echo sockets made
// once per process (inside the private namespace) on 127.0.0.1:8080 and
// [::1]:8080, and the connections one input accepted.
struct HostPeers {
    int listen4 = -1, listen6 = -1;
    int udp4 = -1, udp6 = -1;
    std::vector<int> conns;

    static int listen_on(int family, int type = SOCK_STREAM) {
        int fd = ::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) fuzz::fail("listener socket");
        int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_storage ss{};
        socklen_t len;
        if (family == AF_INET6) {
            auto *a = reinterpret_cast<sockaddr_in6 *>(&ss);
            a->sin6_family = AF_INET6;
            a->sin6_addr = in6addr_loopback;
            a->sin6_port = htons(8080);
            len = sizeof *a;
        } else {
            auto *a = reinterpret_cast<sockaddr_in *>(&ss);
            a->sin_family = AF_INET;
            a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            a->sin_port = htons(8080);
            len = sizeof *a;
        }
        if (::bind(fd, reinterpret_cast<sockaddr *>(&ss), len) < 0 ||
            (type == SOCK_STREAM && ::listen(fd, 64) < 0))
            fuzz::fail("listener bind/listen");
        return fd;
    }
    void open() {
        listen4 = listen_on(AF_INET);
        listen6 = listen_on(AF_INET6);
        udp4 = listen_on(AF_INET, SOCK_DGRAM);
        udp6 = listen_on(AF_INET6, SOCK_DGRAM);
    }
    // Sends every datagram that arrived back to its sender (a bounded
    // number per call).
    static void echo_udp(int fd) {
        static uint8_t buf[65536];
        for (int i = 0; i < 64; ++i) {
            sockaddr_storage from{};
            socklen_t fl = sizeof from;
            ssize_t n = ::recvfrom(fd, buf, sizeof buf, MSG_DONTWAIT,
                                   reinterpret_cast<sockaddr *>(&from), &fl);
            if (n < 0) return;
            (void)::sendto(fd, buf, size_t(n), MSG_DONTWAIT,
                           reinterpret_cast<sockaddr *>(&from), fl);
        }
    }
    // Accepts what is pending, echoes what arrived, closes on EOF.
    void serve() {
        echo_udp(udp4);
        echo_udp(udp6);
        for (int l : {listen4, listen6})
            for (int c; conns.size() < 32 &&
                        (c = ::accept4(l, nullptr, nullptr,
                                       SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;)
                conns.push_back(c);
        uint8_t buf[16384];
        for (int &c : conns) {
            if (c < 0) continue;
            ssize_t n = ::recv(c, buf, sizeof buf, 0);
            if (n > 0) (void)::send(c, buf, size_t(n), MSG_NOSIGNAL);
            if (n == 0) {
                ::close(c);
                c = -1;
            }
        }
    }
    void close_all() {
        for (int c : conns)
            if (c >= 0) ::close(c);
        conns.clear();
        // Datagrams of this input are not the next one's.
        for (int fd : {udp4, udp6}) {
            uint8_t b[1];
            while (::recv(fd, b, sizeof b, MSG_DONTWAIT | MSG_TRUNC) >= 0) {
            }
        }
    }
};

// Next sequence libslirp sends per connection, for the ack fix-up (a few
// connections per input; the oldest is forgotten first).
struct SentSeqs {
    struct Entry {
        uint8_t guest[16], remote[16];
        uint16_t gport, rport;
        uint32_t next;
    };
    std::vector<Entry> entries;

    void note(std::span<const uint8_t> frame) {
        tcp::Segment s;
        if (tcp::parse_segment(frame, s) != Parse::Ok) return;
        uint32_t next = s.seq + uint32_t(s.payload.size()) +
                        ((s.flags & (tcp::kSyn | tcp::kFin)) ? 1 : 0);
        for (auto &e : entries)
            if (!std::memcmp(e.guest, s.dst, 16) && !std::memcmp(e.remote, s.src, 16) &&
                e.gport == s.dport && e.rport == s.sport) {
                e.next = next;
                return;
            }
        if (entries.size() == 8) entries.erase(entries.begin());
        Entry e{};
        std::memcpy(e.guest, s.dst, 16);
        std::memcpy(e.remote, s.src, 16);
        e.gport = s.dport, e.rport = s.sport, e.next = next;
        entries.push_back(e);
    }
    // Rewrites the ack of a guest segment of a known connection in a frame
    // as read from the tap.
    void fix_ack(std::span<uint8_t> raw, bool vnet) const {
        if (vnet && raw.size() < kVnetHdrSize) return;
        bool partial = vnet && (raw[0] & kVnetNeedsCsum) != 0;
        std::span<uint8_t> frame = vnet ? raw.subspan(kVnetHdrSize) : raw;
        tcp::Segment s;
        if (tcp::parse_segment(frame, s) != Parse::Ok) return;
        for (const auto &e : entries)
            if (!std::memcmp(e.guest, s.src, 16) && !std::memcmp(e.remote, s.dst, 16) &&
                e.gport == s.sport && e.rport == s.dport) {
                uint8_t *th = frame.data() + 14 +
                              (s.v6 ? 40 : size_t(frame[14] & 0x0f) * 4);
                size_t seg_len = size_t(th[12] >> 4) * 4 + s.payload.size();
                th[8] = uint8_t(e.next >> 24), th[9] = uint8_t(e.next >> 16);
                th[10] = uint8_t(e.next >> 8), th[11] = uint8_t(e.next);
                th[16] = th[17] = 0;
                const uint8_t *ip = frame.data() + 14;
                uint8_t tail[4] = {0, 6, uint8_t(seg_len >> 8), uint8_t(seg_len)};
                uint64_t sum = s.v6 ? csum_add(0, ip + 8, 32) : csum_add(0, ip + 12, 8);
                sum = csum_add(sum, tail, 4);
                // Partial: the pseudo-header sum, as the guest's kernel
                // leaves it for finish_checksum.
                if (partial) put_be16(th + 16, csum_fold(sum));
                else put_be16(th + 16, uint16_t(~csum_fold(csum_add(sum, th, seg_len))));
                return;
            }
    }
};

} // namespace fuzz::frames
