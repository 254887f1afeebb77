#include "models/savedmodel/sstable.h"

#include <array>
#include <vector>

#include "absl/strings/str_cat.h"

namespace rnnserve::models::savedmodel {
namespace {

constexpr uint64_t kTableMagic = 0xdb4775248b80fb57ull;
constexpr size_t kFooterSize = 48;
constexpr size_t kTrailerSize = 5;

std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    table[i] = c;
  }
  return table;
}

uint32_t Fixed32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

uint64_t Fixed64(const char* p) { return uint64_t{Fixed32(p)} | (uint64_t{Fixed32(p + 4)} << 32); }

// Reads a varint of at most `max_bytes` bytes from [*pos, end); false if cut short or too long.
bool Varint(std::string_view in, size_t* pos, uint64_t* out, int max_bytes) {
  uint64_t v = 0;
  for (int i = 0; i < max_bytes; ++i) {
    if (*pos >= in.size()) return false;
    const uint8_t b = static_cast<uint8_t>(in[(*pos)++]);
    v |= uint64_t{b & 0x7fu} << (7 * i);
    if ((b & 0x80) == 0) {
      *out = v;
      return true;
    }
  }
  return false;
}

struct Handle {
  uint64_t offset = 0;
  uint64_t size = 0;
};

class Reader {
 public:
  Reader(std::string_view bytes, const std::string& name, const SstableLimits& limits)
      : bytes_(bytes), name_(name), limits_(limits) {}

  absl::StatusOr<std::map<std::string, std::string>> ReadAll();

 private:
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": not a valid table file: ", what));
  }
  absl::StatusOr<Handle> ParseHandle(std::string_view in, size_t* pos, const char* what) const;
  // The checked contents of the block at `h` (trailer verified).
  absl::StatusOr<std::string_view> Block(const Handle& h, const char* what) const;
  // Appends the block's entries to `out`.
  absl::Status Entries(std::string_view block, const char* what,
                       std::vector<std::pair<std::string, std::string>>* out) const;

  const std::string_view bytes_;
  const std::string& name_;
  const SstableLimits& limits_;
};

absl::StatusOr<Handle> Reader::ParseHandle(std::string_view in, size_t* pos,
                                           const char* what) const {
  Handle h;
  if (!Varint(in, pos, &h.offset, 10) || !Varint(in, pos, &h.size, 10)) {
    return Error(absl::StrCat("the ", what, " block handle is cut short"));
  }
  return h;
}

absl::StatusOr<std::string_view> Reader::Block(const Handle& h, const char* what) const {
  const uint64_t limit = bytes_.size() - kFooterSize;
  if (h.offset > limit || h.size > limit - h.offset || kTrailerSize > limit - h.offset - h.size) {
    return Error(absl::StrCat("the ", what, " block [", h.offset, ", +", h.size,
                              "] lies past the end of the ", bytes_.size(), "-byte file"));
  }
  const std::string_view block = bytes_.substr(h.offset, h.size);
  const char type = bytes_[h.offset + h.size];
  const uint32_t stored = Fixed32(bytes_.data() + h.offset + h.size + 1);
  const uint32_t actual = MaskCrc(Crc32c(std::string_view(&type, 1), Crc32c(block)));
  if (stored != actual) {
    return Error(absl::StrCat("the ", what, " block at offset ", h.offset,
                              " fails its CRC-32C check (corrupt file)"));
  }
  if (type != 0) {
    return Error(absl::StrCat("the ", what, " block is compressed (type ", int{type},
                              "); expected an uncompressed table as TensorFlow writes"));
  }
  return block;
}

absl::Status Reader::Entries(std::string_view block, const char* what,
                             std::vector<std::pair<std::string, std::string>>* out) const {
  if (block.size() < 4) return Error(absl::StrCat("the ", what, " block is too short"));
  const uint32_t restarts = Fixed32(block.data() + block.size() - 4);
  if (restarts == 0 || restarts > (block.size() - 4) / 4) {
    return Error(absl::StrCat("the ", what, " block has a bad restart count (", restarts, ")"));
  }
  const std::string_view data = block.substr(0, block.size() - 4 - 4 * size_t{restarts});
  size_t pos = 0;
  std::string key;
  while (pos < data.size()) {
    uint64_t shared = 0, unshared = 0, value_size = 0;
    if (!Varint(data, &pos, &shared, 5) || !Varint(data, &pos, &unshared, 5) ||
        !Varint(data, &pos, &value_size, 5)) {
      return Error(absl::StrCat("an entry of the ", what, " block is cut short"));
    }
    if (shared > key.size() || unshared > data.size() - pos ||
        value_size > data.size() - pos - unshared) {
      return Error(absl::StrCat("an entry of the ", what, " block runs past the block"));
    }
    key.resize(shared);
    key.append(data.substr(pos, unshared));
    pos += unshared;
    if (static_cast<int64_t>(out->size()) >= limits_.max_entries) {
      return Error(absl::StrCat("more than ", limits_.max_entries, " entries"));
    }
    out->emplace_back(key, std::string(data.substr(pos, value_size)));
    pos += value_size;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, std::string>> Reader::ReadAll() {
  if (bytes_.size() < kFooterSize) {
    return Error(absl::StrCat("the file has ", bytes_.size(), " bytes, fewer than the ",
                              kFooterSize, "-byte footer"));
  }
  const std::string_view footer = bytes_.substr(bytes_.size() - kFooterSize);
  if (Fixed64(footer.data() + 40) != kTableMagic) return Error("bad magic number in the footer");
  size_t pos = 0;
  if (auto meta = ParseHandle(footer, &pos, "metaindex"); !meta.ok()) return meta.status();
  auto index_handle = ParseHandle(footer, &pos, "index");
  if (!index_handle.ok()) return index_handle.status();
  auto index = Block(*index_handle, "index");
  if (!index.ok()) return index.status();
  std::vector<std::pair<std::string, std::string>> handles;
  if (auto s = Entries(*index, "index", &handles); !s.ok()) return s;
  std::map<std::string, std::string> out;
  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto& [last_key, encoded] : handles) {
    size_t hpos = 0;
    auto h = ParseHandle(encoded, &hpos, "data");
    if (!h.ok()) return h.status();
    auto block = Block(*h, "data");
    if (!block.ok()) return block.status();
    entries.clear();
    if (auto s = Entries(*block, "data", &entries); !s.ok()) return s;
    for (auto& [k, v] : entries) out[k] = std::move(v);
  }
  return out;
}

}  // namespace

uint32_t Crc32c(std::string_view data, uint32_t init) {
  static const std::array<uint32_t, 256> table = MakeCrcTable();
  uint32_t c = ~init;
  for (char ch : data) c = table[(c ^ static_cast<uint8_t>(ch)) & 0xff] ^ (c >> 8);
  return ~c;
}

absl::StatusOr<std::map<std::string, std::string>> ReadSstable(std::string_view bytes,
                                                               const std::string& name,
                                                               const SstableLimits& limits) {
  return Reader(bytes, name, limits).ReadAll();
}

}  // namespace rnnserve::models::savedmodel
