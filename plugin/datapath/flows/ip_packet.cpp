// SPDX-License-Identifier: Apache-2.0

// Parsing the Ethernet and IP headers of a guest frame for the fast paths.
#include "datapath/flows/ip_packet.hpp"

#include <cstring>

#include "datapath/checksum.hpp"
#include "datapath/flows/endpoints.hpp"

namespace rknp {

Parse parse_ip(std::span<const uint8_t> eth_frame, uint8_t proto4, uint8_t proto6,
               IpPacket &out) {
    if (eth_frame.size() < kEthLen) return Parse::NotMine;
    const uint8_t *ip = eth_frame.data() + kEthLen;
    const size_t avail = eth_frame.size() - kEthLen;
    switch (be16(eth_frame.data() + 12)) {
    case 0x0800: {
        if (avail < kIp4Len || (ip[0] >> 4) != 4 || ip[9] != proto4) return Parse::NotMine;
        if ((be16(ip + 6) & 0x3fff) != 0) return Parse::NotMine; // MF or an offset
        const size_t ihl = size_t(ip[0] & 0x0f) * 4, total = be16(ip + 2);
        if (ihl < kIp4Len || total < ihl || total > avail) return Parse::Malformed;
        out.v6 = false;
        map_v4(ip + 12, out.src);
        map_v4(ip + 16, out.dst);
        out.header = {ip, ihl};
        out.l4 = {ip + ihl, total - ihl};
        return Parse::Ok;
    }
    case 0x86dd: {
        // A next header other than proto6 may be an extension header: NotMine.
        if (avail < kIp6Len || (ip[0] >> 4) != 6 || ip[6] != proto6) return Parse::NotMine;
        const size_t plen = be16(ip + 4);
        if (plen > avail - kIp6Len) return Parse::Malformed;
        out.v6 = true;
        std::memcpy(out.src, ip + 8, 16);
        std::memcpy(out.dst, ip + 24, 16);
        out.header = {ip, kIp6Len};
        out.l4 = {ip + kIp6Len, plen};
        return Parse::Ok;
    }
    default:
        return Parse::NotMine;
    }
}

} // namespace rknp
