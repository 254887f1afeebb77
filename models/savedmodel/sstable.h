#pragma once

// A reader for the table files TensorFlow writes (tensorflow/core/lib/io/table: LevelDB's
// SSTable format), as `variables.index` of a checkpoint is one.
//
// Layout read here, from the end of the file:
//   footer (48 bytes): metaindex BlockHandle, index BlockHandle (each varint64 offset, varint64
//     size), zero padding to 40 bytes, then the magic 0xdb4775248b80fb57 (fixed64, little end).
//   block: entries, then restart offsets (fixed32 each) and their count (fixed32); each entry
//     is varint32 shared key bytes, varint32 unshared, varint32 value size, key suffix, value.
//     A block is followed by a 5-byte trailer: compression type (0: none; TensorFlow writes
//     bundle indexes uncompressed) and the masked CRC-32C of the block and the type byte.
//   the index block maps each data block's last key to the data block's handle.
// Every offset and size is checked against the file before it is read, so a truncated or
// corrupt file fails with INVALID_ARGUMENT naming `name` and what was wrong.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace rnnserve::models::savedmodel {

// CRC-32C (Castagnoli) of `data`, and LevelDB's masking of a stored CRC.
uint32_t Crc32c(std::string_view data, uint32_t init = 0);
inline uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

struct SstableLimits {
  int64_t max_entries = 1'000'000;
};

// Every key and value of the table in `bytes`, in key order. `name` is used in messages.
absl::StatusOr<std::map<std::string, std::string>> ReadSstable(std::string_view bytes,
                                                               const std::string& name,
                                                               const SstableLimits& limits = {});

}  // namespace rnnserve::models::savedmodel
