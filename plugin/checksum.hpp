// Internet checksum helpers (RFC 1071) for the frame path.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rknp {

// One's-complement sum of data, added to sum (not folded).
uint64_t csum_add(uint64_t sum, const uint8_t *data, size_t len);
// Folds a sum to 16 bits (not complemented).
uint16_t csum_fold(uint64_t sum);

} // namespace rknp
