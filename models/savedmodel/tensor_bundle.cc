#include "models/savedmodel/tensor_bundle.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "models/savedmodel/savedmodel.pb.h"
#include "models/savedmodel/sstable.h"

namespace rnnserve::models::savedmodel {
namespace {

constexpr int64_t kMaxIndexBytes = int64_t{256} << 20;

// Bytes per element of the dtypes a Keras model's weights use; 0 for the rest.
int64_t ElementSize(int dtype) {
  switch (dtype) {
    case DT_FLOAT:
    case DT_INT32:
      return 4;
    case DT_DOUBLE:
    case DT_INT64:
      return 8;
    case DT_HALF:
      return 2;
    default:
      return 0;
  }
}

float HalfToFloat(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    v = mant ? NAN : INFINITY;
  } else {
    v = std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
  }
  return (h & 0x8000) ? -v : v;
}

}  // namespace

std::string TensorBundle::DataPath(int shard) const {
  return absl::StrFormat("%s.data-%05d-of-%05d", prefix_, shard, num_shards_);
}

absl::StatusOr<TensorBundle> TensorBundle::FromIndex(const std::string& index_bytes,
                                                     const std::string& prefix,
                                                     const std::vector<int64_t>& shard_sizes) {
  const std::string index_name = prefix + ".index";
  auto table = ReadSstable(index_bytes, index_name);
  if (!table.ok()) return table.status();
  TensorBundle bundle;
  bundle.prefix_ = prefix;
  auto error = [&index_name](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(index_name, ": ", what));
  };
  auto header_it = table->find("");
  if (header_it == table->end()) return error("no bundle header (the entry with the empty key)");
  BundleHeaderProto header;
  if (!header.ParseFromString(header_it->second)) return error("the bundle header does not parse");
  if (header.endianness() != BundleHeaderProto::LITTLE) {
    return error("the bundle is big-endian; expected little-endian");
  }
  if (header.num_shards() < 1 || header.num_shards() > 100000) {
    return error(absl::StrCat("num_shards is ", header.num_shards(), "; expected 1 to 100000"));
  }
  bundle.num_shards_ = header.num_shards();
  for (const auto& [key, value] : *table) {
    if (key.empty()) continue;
    BundleEntryProto proto;
    if (!proto.ParseFromString(value)) {
      return error(absl::StrCat("the entry for '", key, "' does not parse"));
    }
    if (proto.slices_size() > 0) {
      return error(
          absl::StrCat("'", key, "' is a partitioned (sliced) variable, which is not supported"));
    }
    BundleEntry e;
    e.dtype = proto.dtype();
    e.shard = proto.shard_id();
    e.offset = proto.offset();
    e.size = proto.size();
    e.masked_crc = proto.crc32c();
    int64_t elements = 1;
    for (const auto& d : proto.shape().dim()) {
      if (d.size() < 0 || (d.size() > 0 && elements > (int64_t{1} << 40) / d.size())) {
        return error(absl::StrCat("'", key, "' has a bad shape dimension ", d.size()));
      }
      e.shape.push_back(d.size());
      elements *= d.size();
    }
    if (e.shard < 0 || e.shard >= bundle.num_shards_ ||
        e.shard >= static_cast<int>(shard_sizes.size())) {
      return error(absl::StrCat("'", key, "' is in shard ", e.shard, "; the bundle has ",
                                bundle.num_shards_));
    }
    const int64_t shard_size = shard_sizes[e.shard];
    if (e.offset < 0 || e.size < 0 || e.offset > shard_size || e.size > shard_size - e.offset) {
      return error(absl::StrCat("'", key, "' points at bytes [", e.offset, ", ", e.offset, " + ",
                                e.size, ") past the end of ", bundle.DataPath(e.shard), " (",
                                shard_size,
                                " bytes); the data file is truncated or does "
                                "not belong to this index"));
    }
    const int64_t elem = ElementSize(e.dtype);
    if (elem > 0 && e.size != elements * elem) {
      return error(absl::StrCat("'", key, "' has ", e.size, " bytes; its dtype and shape [",
                                absl::StrJoin(e.shape, ", "), "] need ", elements * elem));
    }
    bundle.entries_.emplace(key, std::move(e));
  }
  return bundle;
}

absl::StatusOr<TensorBundle> TensorBundle::Open(const std::string& prefix) {
  namespace fs = std::filesystem;
  const std::string index_path = prefix + ".index";
  std::error_code ec;
  const auto index_size = fs::file_size(index_path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat(index_path, ": cannot read: ", ec.message()));
  if (index_size > static_cast<uint64_t>(kMaxIndexBytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(index_path, ": ", index_size, " bytes, more than ", kMaxIndexBytes));
  }
  std::ifstream in(index_path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return absl::NotFoundError(absl::StrCat(index_path, ": cannot read"));
  // The header names the shard count; the data files' sizes are needed to check the entries.
  auto table = ReadSstable(text.str(), index_path);
  if (!table.ok()) return table.status();
  BundleHeaderProto header;
  if (auto it = table->find(""); it != table->end()) header.ParseFromString(it->second);
  TensorBundle probe;
  probe.prefix_ = prefix;
  probe.num_shards_ =
      header.num_shards() > 0 && header.num_shards() <= 100000 ? header.num_shards() : 1;
  std::vector<int64_t> sizes;
  for (int shard = 0; shard < probe.num_shards_; ++shard) {
    const std::string path = probe.DataPath(shard);
    const auto size = fs::file_size(path, ec);
    if (ec) {
      return absl::NotFoundError(absl::StrCat(
          path, ": missing (", ec.message(),
          "); a SavedModel's variables/ directory needs its data files beside the index"));
    }
    sizes.push_back(static_cast<int64_t>(size));
  }
  return FromIndex(text.str(), prefix, sizes);
}

absl::StatusOr<std::string> TensorBundle::ReadBytes(const std::string& key,
                                                    const BundleEntry& e) const {
  const std::string path = DataPath(e.shard);
  std::ifstream in(path, std::ios::binary);
  std::string bytes(static_cast<size_t>(e.size), '\0');
  in.seekg(e.offset);
  in.read(bytes.data(), e.size);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read the ", e.size,
                                                   " bytes of '", key, "' at offset ", e.offset));
  }
  if (e.dtype != DT_STRING && MaskCrc(Crc32c(bytes)) != e.masked_crc) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the bytes of '", key,
                     "' fail their CRC-32C check (a corrupt data file, or one from another "
                     "checkpoint)"));
  }
  return bytes;
}

absl::StatusOr<keras::Array> TensorBundle::ReadFloat(const std::string& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat(prefix_, ": no variable '", key, "'"));
  }
  const BundleEntry& e = it->second;
  if (e.dtype != DT_FLOAT && e.dtype != DT_DOUBLE && e.dtype != DT_HALF) {
    return absl::InvalidArgumentError(absl::StrCat(prefix_, ": variable '", key, "' has dtype ",
                                                   e.dtype, "; expected a float type"));
  }
  auto bytes = ReadBytes(key, e);
  if (!bytes.ok()) return bytes.status();
  keras::Array a;
  a.shape = e.shape;
  const int64_t n = e.size / ElementSize(e.dtype);
  a.data.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    if (e.dtype == DT_FLOAT) {
      std::memcpy(&a.data[i], bytes->data() + 4 * i, 4);
    } else if (e.dtype == DT_DOUBLE) {
      double d;
      std::memcpy(&d, bytes->data() + 8 * i, 8);
      a.data[i] = static_cast<float>(d);
    } else {
      uint16_t h;
      std::memcpy(&h, bytes->data() + 2 * i, 2);
      a.data[i] = HalfToFloat(h);
    }
  }
  return a;
}

absl::StatusOr<std::string> TensorBundle::ReadScalarString(const std::string& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat(prefix_, ": no entry '", key, "'"));
  }
  const BundleEntry& e = it->second;
  if (e.dtype != DT_STRING || !e.shape.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix_, ": '", key, "' is not a scalar string"));
  }
  auto bytes = ReadBytes(key, e);
  if (!bytes.ok()) return bytes.status();
  // [varint64 length][4-byte checksum of the lengths][the string]
  uint64_t len = 0;
  size_t pos = 0;
  for (int shift = 0; pos < bytes->size() && shift < 64; shift += 7) {
    const uint8_t b = static_cast<uint8_t>((*bytes)[pos++]);
    len |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) break;
  }
  if (pos + 4 > bytes->size() || len != bytes->size() - pos - 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix_, ": '", key, "' is a malformed string tensor"));
  }
  // TensorFlow's checksum of a string tensor: each length as a little-endian uint32 (uint64
  // past 4 GiB), then the stored (masked) checksum of the lengths, then the string bytes.
  char len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  uint32_t crc = Crc32c(std::string_view(len_bytes, len <= 0xffffffffu ? 4 : 8));
  crc = Crc32c(std::string_view(bytes->data() + pos, 4), crc);
  crc = Crc32c(std::string_view(bytes->data() + pos + 4, len), crc);
  if (MaskCrc(crc) != e.masked_crc) {
    return absl::InvalidArgumentError(
        absl::StrCat(DataPath(e.shard), ": the bytes of '", key,
                     "' fail their CRC-32C check (a corrupt data file, or one from another "
                     "checkpoint)"));
  }
  return bytes->substr(pos + 4);
}

}  // namespace rnnserve::models::savedmodel
