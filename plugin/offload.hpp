// Tap offloads (IFF_VNET_HDR): every frame on the tap carries a 10-byte
// VnetHdr. Guest -> stack: the kernel hands us TCP super-frames of
// up to 64 KiB (TSO) with a partial checksum that we complete, so libslirp
// sees one large segment instead of dozens. Stack -> guest: consecutive
// in-order segments of one TCP flow are merged into one GSO frame (like a
// NIC's LRO), so the guest's stack handles one packet instead of dozens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace rknp {

// struct virtio_net_hdr (linux/virtio_net.h is not valid C++), little-endian
// as the tap uses it on x86 and arm64.
struct VnetHdr {
    uint8_t flags;
    uint8_t gso_type;
    uint16_t hdr_len;
    uint16_t gso_size;
    uint16_t csum_start;
    uint16_t csum_offset;
};
inline constexpr uint8_t kVnetNeedsCsum = 1;
inline constexpr uint8_t kVnetGsoTcp4 = 1;
inline constexpr uint8_t kVnetGsoTcp6 = 4;
inline constexpr size_t kVnetHdrSize = sizeof(VnetHdr);
static_assert(kVnetHdrSize == 10);

// Completes a kVnetNeedsCsum checksum in frame (Ethernet
// frame without the vnet header). Returns false if the offsets are bogus.
bool complete_checksum(std::span<uint8_t> frame, const VnetHdr &h);

// A frame read from the tap, made ready for slirp_input: strips the vnet
// header (if vnet) and completes a partial checksum. Returns the Ethernet
// frame, or an empty span if the frame must be dropped (bogus offsets).
// IPv4 fragments still need Ipv4Reassembler (reassembly.hpp).
std::span<uint8_t> prepare_guest_frame(std::span<uint8_t> raw, bool vnet);

// Merges stack -> guest TCP segments. Frames are written through the sink
// in the order they were given; flush() must be called before the loop
// sleeps. Of consecutive pure ACKs of one flow, each acking more than the
// one before, only the last is written (like GRO would merge them): a
// cumulative ACK says all the earlier ones did; duplicate ACKs all go out.
class Coalescer {
public:
    // sink(header, frame, rest) writes one frame, given as frame followed by
    // rest (often empty), with its vnet header.
    using Sink = std::function<void(const VnetHdr &, std::span<const uint8_t>,
                                    std::span<const uint8_t>)>;
    explicit Coalescer(Sink sink);

    void push(std::span<const uint8_t> frame);
    void flush();
    // Pure ACKs left out because a later one superseded them, and their bytes.
    uint64_t acks_superseded() const { return acks_superseded_; }
    uint64_t superseded_bytes() const { return superseded_bytes_; }

private:
    struct Flow; // parsed headers of a mergeable segment
    bool parse(std::span<const uint8_t> frame, Flow &f) const;
    bool can_append(const Flow &f) const;
    bool supersedes(std::span<const uint8_t> frame, const Flow &f) const;
    void emit_pending();

    Sink sink_;
    std::vector<uint8_t> buf_; // headers of the first segment + payloads
    size_t segments_ = 0;
    size_t hdr_len_ = 0;   // Ethernet + IP + TCP
    size_t l3_off_ = 14;
    bool ipv6_ = false;
    uint16_t gso_size_ = 0;
    uint16_t last_len_ = 0;
    uint32_t next_seq_ = 0;
    bool push_flag_ = false;
    std::vector<uint8_t> head_; // headers of a segment written unmerged
    std::vector<uint8_t> ack_;  // the pending pure ACK, when ack_pending_
    uint32_t ack_no_ = 0;
    bool ack_pending_ = false;
    uint64_t acks_superseded_ = 0, superseded_bytes_ = 0;
};

} // namespace rknp
