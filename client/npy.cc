#include "client/npy.h"

#include <zip.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace rnnserve::client {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr int64_t kMaxElements = int64_t{1} << 31;

// Finds `'key': value` in the header dict and returns the raw value text.
std::string HeaderField(const std::string& header, const std::string& key) {
  const std::string pat = "'" + key + "':";
  size_t pos = header.find(pat);
  if (pos == std::string::npos) return "";
  pos += pat.size();
  while (pos < header.size() && header[pos] == ' ') ++pos;
  if (pos < header.size() && header[pos] == '(') {
    return header.substr(pos, header.find(')', pos) - pos + 1);
  }
  size_t end = pos;
  if (header[pos] == '\'')
    end = header.find('\'', pos + 1) + 1;
  else
    while (end < header.size() && header[end] != ',' && header[end] != '}') ++end;
  return header.substr(pos, end - pos);
}

template <typename T>
void Decode(const char* p, int64_t n, std::vector<double>* out) {
  out->resize(n);
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    (*out)[i] = static_cast<double>(v);
  }
}

std::string Header(const std::string& descr, const std::vector<int64_t>& shape) {
  std::string dims;
  for (int64_t d : shape) absl::StrAppend(&dims, d, ",");
  if (shape.size() > 1) dims.pop_back();
  std::string h =
      absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': (", dims, "), }");
  const size_t total = 10 + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h.push_back('\n');
  std::string out(kMagic, 6);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(h.size() & 0xff));
  out.push_back(static_cast<char>((h.size() >> 8) & 0xff));
  return out + h;
}

}  // namespace

absl::StatusOr<NpyArray> ParseNpy(const std::string& bytes, const std::string& what) {
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not a .npy file (bad magic)"));
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    offset = 10;
  } else {
    if (bytes.size() < 12) return absl::InvalidArgumentError(absl::StrCat(what, ": truncated"));
    header_len = 0;
    for (int i = 0; i < 4; ++i)
      header_len |= size_t(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    offset = 12;
  }
  if (offset + header_len > bytes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": truncated header"));
  }
  const std::string header = bytes.substr(offset, header_len);
  NpyArray out;
  out.descr =
      std::string(absl::StripSuffix(absl::StripPrefix(HeaderField(header, "descr"), "'"), "'"));
  if (HeaderField(header, "fortran_order") == "True") {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": Fortran-order arrays are not supported"));
  }
  std::string shape = HeaderField(header, "shape");
  shape = std::string(absl::StripSuffix(absl::StripPrefix(shape, "("), ")"));
  int64_t n = 1;
  for (absl::string_view part : absl::StrSplit(shape, ',', absl::SkipWhitespace())) {
    int64_t d;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &d) || d < 0 ||
        (n *= std::max<int64_t>(d, 1)) > kMaxElements) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": bad shape (", shape, ")"));
    }
    out.shape.push_back(d);
  }
  n = 1;
  for (int64_t d : out.shape) n *= d;
  const char* data = bytes.data() + offset + header_len;
  const size_t avail = bytes.size() - offset - header_len;
  size_t item = 0;
  const std::string& d = out.descr;
  if (d == "<f4" || d == "<i4" || d == "<u4")
    item = 4;
  else if (d == "<f8" || d == "<i8" || d == "<u8")
    item = 8;
  else if (d == "|b1" || d == "|u1" || d == "|i1")
    item = 1;
  else if (d == "<i2" || d == "<u2")
    item = 2;
  else
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": unsupported dtype '", d, "' (float32/64, int8-64, bool)"));
  if (avail < item * static_cast<size_t>(n)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": truncated data (", avail, " bytes for ",
                                                   n, " elements of ", item, ")"));
  }
  if (d == "<f4")
    Decode<float>(data, n, &out.values);
  else if (d == "<f8")
    Decode<double>(data, n, &out.values);
  else if (d == "<i4")
    Decode<int32_t>(data, n, &out.values);
  else if (d == "<u4")
    Decode<uint32_t>(data, n, &out.values);
  else if (d == "<i8")
    Decode<int64_t>(data, n, &out.values);
  else if (d == "<u8")
    Decode<uint64_t>(data, n, &out.values);
  else if (d == "<i2")
    Decode<int16_t>(data, n, &out.values);
  else if (d == "<u2")
    Decode<uint16_t>(data, n, &out.values);
  else if (d == "|i1")
    Decode<int8_t>(data, n, &out.values);
  else
    Decode<uint8_t>(data, n, &out.values);
  return out;
}

absl::StatusOr<NpyArray> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseNpy(ss.str(), path);
}

absl::StatusOr<std::map<std::string, NpyArray>> ReadNpz(const std::string& path) {
  int err = 0;
  std::unique_ptr<zip_t, int (*)(zip_t*)> zip(zip_open(path.c_str(), ZIP_RDONLY, &err), zip_close);
  if (!zip) return absl::InvalidArgumentError(absl::StrCat(path, ": not a readable .npz (zip)"));
  std::map<std::string, NpyArray> out;
  const zip_int64_t n = zip_get_num_entries(zip.get(), 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    if (zip_stat_index(zip.get(), i, 0, &st) != 0) continue;
    absl::string_view name_view = st.name;
    if (!absl::ConsumeSuffix(&name_view, ".npy")) continue;
    const std::string name(name_view);
    if (st.size > static_cast<zip_uint64_t>(kMaxElements) * 8) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": entry ", st.name, " is too large"));
    }
    std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> f(zip_fopen_index(zip.get(), i, 0),
                                                        zip_fclose);
    if (!f) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read ", st.name));
    std::string bytes(st.size, '\0');
    if (zip_fread(f.get(), bytes.data(), st.size) != static_cast<zip_int64_t>(st.size)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": truncated entry ", st.name));
    }
    auto arr = ParseNpy(bytes, absl::StrCat(path, ":", st.name));
    if (!arr.ok()) return arr.status();
    out[name] = std::move(*arr);
  }
  return out;
}

std::string SerializeNpyFloat32(const std::vector<int64_t>& shape, const std::vector<float>& v) {
  std::string out = Header("<f4", shape);
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  return out;
}

std::string SerializeNpyInt64(const std::vector<int64_t>& shape, const std::vector<int64_t>& v) {
  std::string out = Header("<i8", shape);
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t));
  return out;
}

absl::Status WriteNpz(const std::string& path,
                      const std::map<std::string, std::string>& npy_bytes_by_name) {
  int err = 0;
  zip_t* zip = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  if (!zip) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot create"));
  for (const auto& [name, bytes] : npy_bytes_by_name) {
    zip_source_t* src = zip_source_buffer(zip, bytes.data(), bytes.size(), 0);
    if (!src || zip_file_add(zip, (name + ".npy").c_str(), src, ZIP_FL_OVERWRITE) < 0) {
      if (src) zip_source_free(src);
      zip_discard(zip);
      return absl::InternalError(absl::StrCat(path, ": cannot add ", name));
    }
  }
  if (zip_close(zip) != 0) {
    zip_discard(zip);
    return absl::InternalError(absl::StrCat(path, ": cannot write"));
  }
  return absl::OkStatus();
}

}  // namespace rnnserve::client
