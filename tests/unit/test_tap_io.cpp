// SPDX-License-Identifier: Apache-2.0

// Reading guest frames from the tap: a frame that fills the buffer is cut
// and dropped (counted), an error of one frame drops that frame and keeps
// the tap, only end of file or an error of the tap itself lets it go.
#include <doctest/doctest.h>

#include <errno.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "datapath/tap_io.hpp"

using namespace rknp;

namespace {

// A SOCK_SEQPACKET pair reads like a tap: one message per read, cut to the
// buffer. The tap gets one end; the other, the guest's, is returned.
int attach_pair(TapIo &tap) {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    tap.attach(UniqueFd(sv[0]), false);
    return sv[1];
}

} // namespace

TEST_CASE("tap read results: per-frame errors keep the tap, tap errors let it go") {
    CHECK(classify_tap_read(60, 0, 100) == TapRead::Frame);
    CHECK(classify_tap_read(100, 0, 100) == TapRead::Truncated);
    CHECK(classify_tap_read(-1, EINTR, 100) == TapRead::Retry);
    CHECK(classify_tap_read(-1, EAGAIN, 100) == TapRead::Empty);
    for (int e : {EINVAL, EFAULT, EMSGSIZE, ENOBUFS, ENOMEM})
        CHECK(classify_tap_read(-1, e, 100) == TapRead::DropOne);
    // The child's network namespace is gone (EBADFD), or the fd is bad.
    for (int e : {EBADFD, EBADF, EIO, ENODEV, ENXIO})
        CHECK(classify_tap_read(-1, e, 100) == TapRead::Gone);
    CHECK(classify_tap_read(0, 0, 100) == TapRead::Gone);
}

TEST_CASE("a frame that fills the buffer is dropped and counted; the next one arrives") {
    Stats stats;
    TapIo tap(stats);
    const int guest = attach_pair(tap);
    std::vector<uint8_t> buf(100), big(150, 0xAA), small(60, 0x55);
    REQUIRE(::write(guest, big.data(), big.size()) == 150);
    REQUIRE(::write(guest, small.data(), small.size()) == 60);
    size_t len = 0;
    CHECK(tap.read_frame(buf, len) == TapRead::Truncated);
    CHECK(stats.frames_truncated.load() == 1);
    CHECK(stats.frames_dropped.load() == 1);
    CHECK(tap.read_frame(buf, len) == TapRead::Frame);
    CHECK(len == 60);
    CHECK(buf[0] == 0x55);
    CHECK(tap.read_frame(buf, len) == TapRead::Empty);
    CHECK(tap.attached());
    ::close(guest);
    CHECK(tap.read_frame(buf, len) == TapRead::Gone);
    CHECK(errno == 0); // end of file
}

TEST_CASE("a frame the kernel cannot copy out (EFAULT) is dropped, the tap kept") {
    Stats stats;
    TapIo tap(stats);
    const int guest = attach_pair(tap);
    uint8_t frame[60] = {1};
    REQUIRE(::write(guest, frame, sizeof frame) == 60);
    long page = ::sysconf(_SC_PAGESIZE);
    void *p = ::mmap(nullptr, size_t(page), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    size_t len = 0;
    CHECK(tap.read_frame({static_cast<uint8_t *>(p), size_t(page)}, len) ==
          TapRead::DropOne);
    CHECK(errno == EFAULT);
    CHECK(stats.frames_dropped.load() == 1);
    CHECK(stats.frames_truncated.load() == 0);
    CHECK(tap.attached());
    ::munmap(p, size_t(page));
    ::close(guest);
}

TEST_CASE("a frame that needs offloads never reaches a tap without vnet headers") {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0);
    UniqueFd peer(sv[1]);
    Stats stats;
    TapIo tap(stats);
    tap.attach(UniqueFd(sv[0]), false);
    std::vector<uint8_t> frame(60, 0x11), got(200);
    VnetHdr partial{};
    partial.flags = kVnetNeedsCsum; // a fast path's frame: checksum left to offload
    tap.write_frame(partial, frame, {});
    CHECK(stats.frames_dropped.load() == 1);
    CHECK(::read(peer.get(), got.data(), got.size()) < 0); // nothing written
    VnetHdr plain{};
    tap.write_frame(plain, frame, {}); // libslirp's: complete, no header
    CHECK(::read(peer.get(), got.data(), got.size()) == 60);
    CHECK(stats.frames_to_tap.load() == 1);
}

// The loop reads the tap dry only in a burst (TapIo::burst); a read past
// the last frame (EAGAIN) is a system call per wake-up for nothing. A
// guest's short connection wakes the loop with one frame at a time, in
// rounds separated by host-socket rounds, except its RST and the next
// connection's SYN, two rounds running: never a burst. Three are.
TEST_CASE("a short connection's frames are read one a round, a burst dry") {
    Stats stats;
    TapIo tap(stats);
    // SYN | connect done | data | host's echo | RST, next SYN | ...
    const bool connection[] = {true, false, true, false, true};
    for (int c = 0; c < 3; ++c)
        for (bool ready : connection) CHECK_FALSE(tap.burst(ready));
    CHECK_FALSE(tap.burst(true)); // a third round running: a burst
    CHECK(tap.burst(true));
    CHECK(tap.burst(true));
    CHECK_FALSE(tap.burst(false)); // a round without frames ends it
    CHECK_FALSE(tap.burst(true));
}

// What the guest's kernel answers while a frame is written to the tap (the
// ACK of a SYN-ACK) is queued when the write returns: the loop reads it
// before it waits, and only then (TapIo::answer_due).
TEST_CASE("an answer is due from a frame just written until the tap is read") {
    Stats stats;
    TapIo tap(stats);
    const int guest = attach_pair(tap);
    std::vector<uint8_t> buf(100);
    const uint8_t frame[60] = {1};
    CHECK_FALSE(tap.answer_due());
    tap.write_frame(VnetHdr{}, frame, {});
    CHECK_FALSE(tap.answer_due()); // a frame the guest need not answer
    tap.write_frame(VnetHdr{}, frame, {});
    tap.expect_answer();
    CHECK(tap.answer_due());
    REQUIRE(::write(guest, frame, sizeof frame) == 60); // the guest's ACK
    size_t len = 0;
    CHECK(tap.read_frame(buf, len) == TapRead::Frame);
    CHECK_FALSE(tap.answer_due());
    tap.expect_answer(); // no answer came: the read finds none, and it is over
    CHECK(tap.read_frame(buf, len) == TapRead::Empty);
    CHECK_FALSE(tap.answer_due());
    ::close(guest);
}
