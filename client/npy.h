#pragma once

// NumPy .npy and .npz files: what users have their inputs in and what `--output` writes.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rnnserve::client {

struct NpyArray {
  std::string descr;  // numpy dtype string as read, e.g. "<f4", "<i8"
  std::vector<int64_t> shape;
  std::vector<double> values;  // every supported dtype is exact in double (ints < 2^53)
  bool is_integer() const { return descr.size() >= 2 && (descr[1] == 'i' || descr[1] == 'u'); }
};

absl::StatusOr<NpyArray> ParseNpy(const std::string& bytes, const std::string& what);
absl::StatusOr<NpyArray> ReadNpy(const std::string& path);
absl::StatusOr<std::map<std::string, NpyArray>> ReadNpz(const std::string& path);

// Serialises as "<f4" (float32) or "<i8" (int64) .npy bytes.
std::string SerializeNpyFloat32(const std::vector<int64_t>& shape, const std::vector<float>& v);
std::string SerializeNpyInt64(const std::vector<int64_t>& shape, const std::vector<int64_t>& v);

// Writes an uncompressed .npz of float32 arrays (what np.load reads).
absl::Status WriteNpz(const std::string& path,
                      const std::map<std::string, std::string>& npy_bytes_by_name);

}  // namespace rnnserve::client
