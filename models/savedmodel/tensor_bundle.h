#pragma once

// A TensorFlow checkpoint (TensorBundle), as a SavedModel keeps its variables:
//   <prefix>.index                   a table (sstable.h): key "" holds a BundleHeaderProto, every
//                                    other key a tensor's BundleEntryProto (dtype, shape,
//                                    shard_id, offset, size, masked CRC-32C of the bytes)
//   <prefix>.data-SSSSS-of-NNNNN     the tensors' raw little-endian bytes, shard by shard
// Entries are checked when opened (shard in range, [offset, offset + size) inside its data
// file, size equal to what dtype and shape need) and their CRC when read. Partitioned
// (sliced) variables and big-endian bundles are refused.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/keras/hdf5_file.h"

namespace rnnserve::models::savedmodel {

struct BundleEntry {
  int dtype = 0;  // tensorflow.DataType
  std::vector<int64_t> shape;
  int shard = 0;
  int64_t offset = 0;
  int64_t size = 0;
  uint32_t masked_crc = 0;
};

class TensorBundle {
 public:
  // `prefix` is e.g. "<version>/variables/variables".
  static absl::StatusOr<TensorBundle> Open(const std::string& prefix);
  // From the index's bytes and each shard's size (fuzzing, tests): Read* then fail, as no data
  // file is read.
  static absl::StatusOr<TensorBundle> FromIndex(const std::string& index_bytes,
                                                const std::string& prefix,
                                                const std::vector<int64_t>& shard_sizes);

  bool Has(const std::string& key) const { return entries_.count(key) != 0; }
  // A float32 tensor (float64 and float16 are converted) as an Array.
  absl::StatusOr<keras::Array> ReadFloat(const std::string& key) const;
  // A scalar string tensor (the _CHECKPOINTABLE_OBJECT_GRAPH entry).
  absl::StatusOr<std::string> ReadScalarString(const std::string& key) const;
  const std::map<std::string, BundleEntry>& entries() const { return entries_; }

 private:
  absl::StatusOr<std::string> ReadBytes(const std::string& key, const BundleEntry& e) const;
  std::string DataPath(int shard) const;

  std::string prefix_;
  int num_shards_ = 1;
  std::map<std::string, BundleEntry> entries_;
};

}  // namespace rnnserve::models::savedmodel
