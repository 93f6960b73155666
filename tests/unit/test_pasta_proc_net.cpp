// SPDX-License-Identifier: Apache-2.0

// rknp-pasta's "auto" ports: listeners parsed from /proc/net/{tcp,udp}[6] text, and read_proc_net.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

#include "../unit/temp_dir.hpp"
#include "cmd/rknp-pasta/proc_net.hpp"

using pasta::listening_ports;
using pasta::read_proc_net;
using pasta::SocketKind;

namespace {

// The samples below are what an x86_64 kernel printed (addresses are
// network-order words printed as native integers: 127.0.0.1 is 0100007F).
constexpr bool kLittleEndian = std::endian::native == std::endian::little;

// 0.0.0.0:2024 and :8080, 192.0.2.1:80 and 10.0.0.5:3000 listen;
// 127.0.0.1:5432 and 127.0.0.53:53 listen on loopback; an established
// connection to 5432 (both ends) and a TIME_WAIT one to 8080.
constexpr const char *kTcp =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode                                                     \n"
    "   0: 0100007F:1538 00000000:0000 0A 00000000:00000001 00:00000000 00000000     0        0 145638 2 0000000098d40953 100 0 0 10 0                    \n"
    "   1: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 320 1 00000000a6462ad5 100 0 0 10 0                       \n"
    "   2: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 145637 1 000000001afbcab8 100 0 0 10 0                    \n"
    "   3: 3500007F:0035 00000000:0000 0A 00000000:00000000 00:00000000 00000000   991        0 145639 1 00000000cf14a98b 100 0 0 10 0                    \n"
    "   4: 010200C0:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000    33        0 145700 1 0000000011a2b3c4 100 0 0 10 0                    \n"
    "   5: 0500000A:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 145701 1 0000000022b3c4d5 100 0 0 10 0                    \n"
    "   6: 0100007F:8754 0100007F:1538 01 00000000:00000000 00:00000000 00000000     0        0 145683 2 00000000fadfb96b 20 0 0 10 -1                    \n"
    "   7: 0100007F:1538 0100007F:8754 01 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000085a99dae 20 0 0 10 -1                         \n"
    "   8: 020200C0:1F90 070200C0:C350 06 00000000:00000000 03:00001770 00000000     0        0 0 3 00000000deadbeef                                      \n"
    "   9: 020200C0:DA3A 070200C0:0016 01 00000000:00000000 02:000A7D8C 00000000  1000        0 145702 1 0000000033c4d5e6 20 4 30 10 -1                   \n";

// [::]:443 and [::]:22 listen, [::1]:22 and [::1]:631 on loopback only,
// [2001:db8::1]:8443 on a specific address; IPv4-mapped ::ffff:127.0.0.1:9000
// (loopback) and ::ffff:192.0.2.1:9001 (not); an established connection.
constexpr const char *kTcp6 =
    "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    "   0: 00000000000000000000000001000000:0277 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 145641 1 00000000b02b8f3e 100 0 0 10 0\n"
    "   1: 00000000000000000000000000000000:01BB 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 145640 1 000000002b8b9a2b 100 0 0 10 0\n"
    "   2: 00000000000000000000000001000000:0016 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 145642 1 000000003c9cab3c 100 0 0 10 0\n"
    "   3: 00000000000000000000000000000000:0016 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 145643 1 000000004dadbc4d 100 0 0 10 0\n"
    "   4: B80D0120000000000000000001000000:20FB 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 145644 1 000000005ebecd5e 100 0 0 10 0\n"
    "   5: 0000000000000000FFFF00000100007F:2328 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 145723 1 00000000b02b8f3e 100 0 0 10 0\n"
    "   6: 0000000000000000FFFF0000010200C0:2329 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 145724 1 000000006fcfde6f 100 0 0 10 0\n"
    "   7: B80D0120000000000000000001000000:20FB B80D0120000000000000000007000000:E1F2 01 00000000:00000000 02:00038E0B 00000000  1000        0 145745 1 0000000070d0ef70 20 4 30 10 -1\n";

// 0.0.0.0:5353 and :68 bound; 127.0.0.53:53 on loopback; a socket
// connected to 192.0.2.7:123 (state 01); and one still in state 07 but
// with a remote port (never printed by Linux, refused all the same).
constexpr const char *kUdp =
    "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops             \n"
    "  110: 00000000:0044 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 13602 2 0000000021e2f3a4 0         \n"
    " 2331: 3500007F:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000   991        0 13563 2 0000000032f3a4b5 0         \n"
    "10397: 00000000:14E9 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 145684 2 0000000031b38a2c 0        \n"
    "12689: 020200C0:DDDD 070200C0:007B 01 00000000:00000000 00:00000000 00000000     0        0 145686 2 000000002aad8fe7 0        \n"
    "12690: 020200C0:DDDE 070200C0:007B 07 00000000:00000000 00:00000000 00000000     0        0 145688 2 000000003bbe9ff8 0        \n";

// [::]:5353 and [fe80::1]:546 bound; [::1]:323 on loopback; a socket
// connected from fd00::2 to 2001:db8::7:123.
constexpr const char *kUdp6 =
    "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n"
    "  323: 00000000000000000000000001000000:0143 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 14001 2 0000000043a4b5c6 0\n"
    "  546: 000080FE000000000000000001000000:0222 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 14002 2 0000000054b5c6d7 0\n"
    " 5246: 000000FD000000000000000002000000:C0CA B80D0120000000000000000007000000:007B 01 00000000:00000000 00:00000000 00000000     0        0 145687 2 00000000877e80f5 0\n"
    "10397: 00000000000000000000000000000000:14E9 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 145685 2 000000001dfa1505 0\n";

// An address as the kernel prints it on this host: each 32-bit word of
// the network-order bytes read as a native integer, "%08X".
std::string kernel_hex(const char *address) {
    unsigned char b[16];
    size_t n = 4;
    if (inet_pton(AF_INET, address, b) != 1) {
        REQUIRE(inet_pton(AF_INET6, address, b) == 1);
        n = 16;
    }
    std::string out;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t w;
        std::memcpy(&w, b + i, 4);
        char buf[9];
        std::snprintf(buf, sizeof buf, "%08X", w);
        out += buf;
    }
    return out;
}

// One /proc/net/tcp-style line with the local address and port, state st.
std::string line(const char *address, unsigned port, unsigned st) {
    std::string local = kernel_hex(address);
    std::string any(local.size(), '0');
    char tail[160];
    std::snprintf(tail, sizeof tail,
                  ":%04X %s:0000 %02X 00000000:00000000 00:00000000 00000000"
                  "     0        0 1 1 0000000000000000 100 0 0 10 0\n",
                  port, any.c_str(), st);
    return "   0: " + local + tail;
}

constexpr const char *kHeader = "  sl  local_address rem_address   st\n";

std::set<unsigned> tcp(const std::string &body) {
    return listening_ports(kHeader + body, SocketKind::tcp);
}

// A listening TCP socket on 0.0.0.0, any port; its port.
int listen_any(unsigned &port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 1) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) == 0);
    port = ntohs(a.sin_port);
    return fd;
}

bool write_all(int fd, const std::string &s) {
    size_t done = 0;
    while (done < s.size()) {
        ssize_t n = ::write(fd, s.data() + done, s.size() - done);
        if (n <= 0) return false;
        done += size_t(n);
    }
    return true;
}

} // namespace

TEST_CASE("pasta proc net: tcp listeners, loopback and connections left out" *
          doctest::skip(!kLittleEndian)) {
    CHECK(listening_ports(kTcp, SocketKind::tcp) ==
          std::set<unsigned>{80, 2024, 3000, 8080});
}

TEST_CASE("pasta proc net: tcp6 listeners, ::1 and mapped 127 left out" *
          doctest::skip(!kLittleEndian)) {
    // 22 listens on :: as well as ::1: one port.
    CHECK(listening_ports(kTcp6, SocketKind::tcp) ==
          std::set<unsigned>{22, 443, 8443, 9001});
}

TEST_CASE("pasta proc net: udp sockets bound and not connected" *
          doctest::skip(!kLittleEndian)) {
    CHECK(listening_ports(kUdp, SocketKind::udp) == std::set<unsigned>{68, 5353});
    CHECK(listening_ports(kUdp6, SocketKind::udp) ==
          std::set<unsigned>{546, 5353});
}

TEST_CASE("pasta proc net: the kind picks the state" *
          doctest::skip(!kLittleEndian)) {
    // UDP's "bound" (07) is TCP's CLOSE, TCP's LISTEN (0A) no UDP state.
    CHECK(listening_ports(kUdp, SocketKind::tcp).empty());
    CHECK(listening_ports(kUdp6, SocketKind::tcp).empty());
    CHECK(listening_ports(kTcp, SocketKind::udp).empty());
    CHECK(listening_ports(kTcp6, SocketKind::udp).empty());
}

TEST_CASE("pasta proc net: loopback on either byte order") {
    // What the samples above assume, on the hosts where they apply.
    if (kLittleEndian) {
        CHECK(kernel_hex("127.0.0.1") == "0100007F");
        CHECK(kernel_hex("::1") == "00000000000000000000000001000000");
    } else {
        CHECK(kernel_hex("127.0.0.1") == "7F000001");
        CHECK(kernel_hex("::1") == "00000000000000000000000000000001");
    }
    constexpr unsigned kListen = 0x0A;
    // 127.0.0.0/8, whole.
    CHECK(tcp(line("127.0.0.1", 22, kListen)).empty());
    CHECK(tcp(line("127.0.0.53", 53, kListen)).empty());
    CHECK(tcp(line("127.255.255.254", 22, kListen)).empty());
    CHECK(tcp(line("::1", 22, kListen)).empty());
    CHECK(tcp(line("::ffff:127.0.0.1", 22, kListen)).empty());
    // Not loopback, whatever their printed digits share with it.
    CHECK(tcp(line("1.0.0.127", 22, kListen)) == std::set<unsigned>{22});
    CHECK(tcp(line("126.255.255.255", 23, kListen)) == std::set<unsigned>{23});
    CHECK(tcp(line("128.0.0.1", 24, kListen)) == std::set<unsigned>{24});
    CHECK(tcp(line("0.0.0.0", 25, kListen)) == std::set<unsigned>{25});
    CHECK(tcp(line("::", 26, kListen)) == std::set<unsigned>{26});
    CHECK(tcp(line("1::", 27, kListen)) == std::set<unsigned>{27});
    CHECK(tcp(line("::2", 28, kListen)) == std::set<unsigned>{28});
    CHECK(tcp(line("::127.0.0.1", 29, kListen)) == std::set<unsigned>{29});
    CHECK(tcp(line("::ffff:1.0.0.127", 30, kListen)) == std::set<unsigned>{30});
    CHECK(tcp(line("::ffff:192.0.2.1", 31, kListen)) == std::set<unsigned>{31});
    CHECK(tcp(line("2001:db8::1", 32, kListen)) == std::set<unsigned>{32});
    // Every state but LISTEN is not a listener.
    for (unsigned st = 1; st <= 0x0C; st++)
        if (st != kListen) CHECK(tcp(line("0.0.0.0", 80, st)).empty());
}

TEST_CASE("pasta proc net: malformed lines are skipped, the rest parsed") {
    std::string text = std::string(kHeader) +
                       "\n"                                   // empty
                       "   0: 00000000:0016\n"                // too few fields
                       "   1: 00000000:0017 00000000:0000\n"  // no state
                       "   2: 000000000017 00000000:0000 0A 0\n" // no ':' in local
                       "   3: 00000000:0018 000000000000 0A 0\n" // no ':' in remote
                       "   4: 00000000:XYZ0 00000000:0000 0A 0\n" // port not hex
                       "   5: 00000000: 00000000:0000 0A 0\n"    // empty port
                       "   6: 00000000:0019 00000000:0000 ZZ 0\n" // state not hex
                       "   7: 00000000:001A 00000000:0000 0A0 0\n" // state 0xA0
                       "   8: 00000000:0000 00000000:0000 0A 0\n" // port 0
                       "   9: 00000000:10000 00000000:0000 0A 0\n" // port > 65535
                       "  10: 00000000:FFFFFFFFFF 00000000:0000 0A 0\n" // overflow
                       "  11: 00000000:-050 00000000:0000 0A 0\n" // signed
                       "  12: 00000000:0050 00000000:0000 0A 0\n" // good: 80
                       "garbage\n"
                       "\t13:\t00000000:0051\t00000000:0000\t0A\t0\n" // tabs: 81
                       "  14: 00000000:FFFF 00000000:0000 0A"; // no '\n': 65535
    CHECK(listening_ports(text, SocketKind::tcp) ==
          std::set<unsigned>{80, 81, 65535});

    // The UDP remote port must parse too.
    std::string udp = std::string(kHeader) +
                      "   0: 00000000:0035 00000000:ZZZZ 07 0\n"
                      "   1: 00000000:0036 00000000:0000 07 0\n";
    CHECK(listening_ports(udp, SocketKind::udp) == std::set<unsigned>{54});
}

TEST_CASE("pasta proc net: the first line is the header, whatever it says") {
    CHECK(listening_ports("", SocketKind::tcp).empty());
    CHECK(listening_ports("\n", SocketKind::tcp).empty());
    CHECK(listening_ports(kHeader, SocketKind::tcp).empty());
    std::string header_only(kHeader);
    header_only.pop_back(); // no trailing newline
    CHECK(listening_ports(header_only, SocketKind::tcp).empty());
    // A data line in the header's place is not read.
    CHECK(listening_ports("   0: 00000000:0050 00000000:0000 0A 0\n"
                          "   1: 00000000:0051 00000000:0000 0A 0\n",
                          SocketKind::tcp) == std::set<unsigned>{81});
}

TEST_CASE("pasta proc net: read_proc_net rereads /proc/self/net/tcp") {
    int fd = ::open("/proc/self/net/tcp", O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    std::string first, second, third;
    REQUIRE(read_proc_net(fd, first));
    CHECK(first.rfind("  sl  local_address rem_address   st", 0) == 0);
    CHECK(first.back() == '\n');

    // A listener opened after the first read shows in the second, which
    // starts over from the header (the fd was left at its end).
    unsigned port = 0;
    int l = listen_any(port);
    REQUIRE(read_proc_net(fd, second));
    CHECK(second.rfind("  sl  local_address rem_address   st", 0) == 0);
    CHECK(second.find("  sl  ", 1) == std::string::npos); // one header
    CHECK(listening_ports(second, SocketKind::tcp).count(port) == 1);

    // Closed, it is gone from the third.
    ::close(l);
    REQUIRE(read_proc_net(fd, third));
    CHECK(listening_ports(third, SocketKind::tcp).count(port) == 0);
    ::close(fd);
}

TEST_CASE("pasta proc net: read_proc_net reads a long file whole, again") {
    // 400 listener lines of 150 bytes: 60 KB, several 16 KiB reads.
    std::string text =
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
    std::set<unsigned> want;
    for (unsigned i = 0; i < 400; i++) {
        char buf[200];
        std::snprintf(buf, sizeof buf,
                      "%4u: 00000000:%04X 00000000:0000 0A 00000000:00000000 "
                      "00:00000000 00000000     0        0 %u 1 "
                      "0000000000000000 100 0 0 10 0%-40s\n",
                      i, 1000 + i, 200000 + i, "");
        text += buf;
        want.insert(1000 + i);
    }
    REQUIRE(text.size() > 3 * 16384);

    TempDir dir;
    std::string path = dir.path() + "/tcp";
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(write_all(fd, text)); // the offset is now at the end

    std::string out = "left over from before";
    REQUIRE(read_proc_net(fd, out));
    CHECK(out.size() == text.size());
    CHECK(out == text);
    CHECK(listening_ports(out, SocketKind::tcp) == want);

    // Again, from the start: the same, not appended.
    REQUIRE(read_proc_net(fd, out));
    CHECK(out == text);

    // Exactly 16 KiB: the read of 0 after a full buffer ends it.
    REQUIRE(::ftruncate(fd, 16384) == 0);
    REQUIRE(read_proc_net(fd, out));
    CHECK(out == text.substr(0, 16384));

    // Shrunk to nothing: empty, not the old text.
    REQUIRE(::ftruncate(fd, 0) == 0);
    REQUIRE(read_proc_net(fd, out));
    CHECK(out.empty());
    ::close(fd);
}

TEST_CASE("pasta proc net: read_proc_net fails on what it cannot reread") {
    std::string out = "stale";
    // A pipe cannot seek back to its start.
    int p[2];
    REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
    REQUIRE(write_all(p[1], "  sl  local_address\n"));
    CHECK_FALSE(read_proc_net(p[0], out));
    ::close(p[0]);
    ::close(p[1]);
    // No descriptor at all.
    CHECK_FALSE(read_proc_net(-1, out));
    // A directory seeks but does not read.
    int d = ::open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    REQUIRE(d >= 0);
    CHECK_FALSE(read_proc_net(d, out));
    ::close(d);
}

TEST_CASE("pasta proc net: the host's ports a loopback client reaches (-T/-U auto)" *
          doctest::skip(!kLittleEndian)) {
    using pasta::loopback_reachable_ports;
    // Loopback and any address; not 192.0.2.1:80 nor 10.0.0.5:3000.
    CHECK(loopback_reachable_ports(kTcp, SocketKind::tcp) ==
          std::set<unsigned>{53, 2024, 5432, 8080});
    // ::1 and :: and mapped 127; not 2001:db8::1 nor mapped 192.0.2.1.
    CHECK(loopback_reachable_ports(kTcp6, SocketKind::tcp) ==
          std::set<unsigned>{22, 443, 631, 9000});
    CHECK(loopback_reachable_ports(kUdp, SocketKind::udp) ==
          std::set<unsigned>{53, 68, 5353});
    CHECK(loopback_reachable_ports(kUdp6, SocketKind::udp) ==
          std::set<unsigned>{323, 5353});
    constexpr unsigned kListen = 0x0A;
    auto reach = [](const std::string &body) {
        return loopback_reachable_ports(kHeader + body, SocketKind::tcp);
    };
    CHECK(reach(line("127.0.0.1", 22, kListen)) == std::set<unsigned>{22});
    CHECK(reach(line("127.1.2.3", 23, kListen)) == std::set<unsigned>{23});
    CHECK(reach(line("0.0.0.0", 24, kListen)) == std::set<unsigned>{24});
    CHECK(reach(line("::", 25, kListen)) == std::set<unsigned>{25});
    CHECK(reach(line("::ffff:0.0.0.0", 26, kListen)) == std::set<unsigned>{26});
    CHECK(reach(line("::1", 27, kListen)) == std::set<unsigned>{27});
    CHECK(reach(line("192.0.2.1", 28, kListen)).empty());
    CHECK(reach(line("::2", 29, kListen)).empty());
    CHECK(reach(line("::ffff:192.0.2.1", 30, kListen)).empty());
    // Not listening: an established connection's port is nobody's to reach.
    CHECK(reach(line("127.0.0.1", 31, 0x01)).empty());
}

TEST_CASE("pasta proc net: ports bound to loopback (--host-lo-to-ns-lo)" *
          doctest::skip(!kLittleEndian)) {
    using pasta::loopback_ports;
    CHECK(loopback_ports(kTcp, SocketKind::tcp) == std::set<unsigned>{53, 5432});
    CHECK(loopback_ports(kTcp6, SocketKind::tcp) == std::set<unsigned>{22, 631, 9000});
    CHECK(loopback_ports(kUdp, SocketKind::udp) == std::set<unsigned>{53});
    CHECK(loopback_ports(kUdp6, SocketKind::udp) == std::set<unsigned>{323});
}
