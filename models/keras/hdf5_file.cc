#include "models/keras/hdf5_file.h"

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rnnserve::models::keras {
namespace {

// Largest dataset we read: 1 Gi elements. A declared size beyond it is a broken file.
constexpr int64_t kMaxElements = int64_t{1} << 30;

class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

std::vector<std::string> ReadStringData(hid_t attr, hid_t type, int64_t count) {
  std::vector<std::string> out;
  if (H5Tis_variable_str(type) > 0) {
    std::vector<char*> ptrs(count, nullptr);
    Handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(type));
    if (H5Aread(attr, mem.get(), ptrs.data()) < 0) return out;
    for (char* p : ptrs) out.emplace_back(p ? p : "");
    Handle space(H5Aget_space(attr), H5Sclose);
    H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, ptrs.data());
    return out;
  }
  const size_t size = H5Tget_size(type);
  std::vector<char> buf(size * count + 1, '\0');
  if (H5Aread(attr, type, buf.data()) < 0) return out;
  for (int64_t i = 0; i < count; ++i) {
    const char* s = buf.data() + i * size;
    size_t n = 0;
    while (n < size && s[n] != '\0') ++n;
    out.emplace_back(s, n);
  }
  return out;
}

}  // namespace

absl::StatusOr<Hdf5File> Hdf5File::Open(const std::string& path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors come back as Status, not stderr
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not an HDF5 file (bad signature)"));
  }
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot open as HDF5 (truncated?)"));
  }
  return Hdf5File(path, id);
}

absl::StatusOr<Hdf5File> Hdf5File::OpenImage(const std::string& bytes, const std::string& name) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  static constexpr char kSignature[] = "\x89HDF\r\n\x1a\n";
  if (bytes.size() < 8 || bytes.compare(0, 8, kSignature, 8) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": not an HDF5 file (bad signature)"));
  }
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.ok() || H5Pset_fapl_core(fapl.get(), 1 << 16, 0) < 0 ||
      H5Pset_file_image(fapl.get(), const_cast<char*>(bytes.data()), bytes.size()) < 0) {
    return absl::InternalError(absl::StrCat(name, ": cannot set up an in-memory HDF5 file"));
  }
  const hid_t id = H5Fopen(name.c_str(), H5F_ACC_RDONLY, fapl.get());
  if (id < 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": cannot open as HDF5 (truncated?)"));
  }
  return Hdf5File(name, id);
}

Hdf5File::Hdf5File(Hdf5File&& other) noexcept
    : path_(std::move(other.path_)), id_(std::exchange(other.id_, -1)) {}

Hdf5File::~Hdf5File() {
  if (id_ >= 0) H5Fclose(id_);
}

bool Hdf5File::Exists(const std::string& object) const {
  if (object == "/" || object.empty()) return true;
  // Check each prefix so a missing intermediate group is not an error.
  size_t pos = 0;
  while (true) {
    pos = object.find('/', pos + 1);
    const std::string prefix = object.substr(0, pos);
    if (!prefix.empty() && prefix != "/" && H5Lexists(id_, prefix.c_str(), H5P_DEFAULT) <= 0) {
      return false;
    }
    if (pos == std::string::npos) return true;
  }
}

bool Hdf5File::IsGroup(const std::string& object) const {
  if (!Exists(object)) return false;
  Handle g(H5Gopen2(id_, object.c_str(), H5P_DEFAULT), H5Gclose);
  return g.ok();
}

bool Hdf5File::HasAttribute(const std::string& object, const std::string& name) const {
  return Exists(object) && H5Aexists_by_name(id_, object.c_str(), name.c_str(), H5P_DEFAULT) > 0;
}

absl::StatusOr<std::string> Hdf5File::ReadString(const std::string& object,
                                                 const std::string& name) const {
  auto strings = ReadStrings(object, name);
  if (!strings.ok()) return strings.status();
  if (strings->size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": attribute ", object, "@", name,
                                                   " holds ", strings->size(),
                                                   " strings, expected 1"));
  }
  return (*strings)[0];
}

absl::StatusOr<std::vector<std::string>> Hdf5File::ReadStrings(const std::string& object,
                                                               const std::string& name) const {
  std::vector<std::string> parts;
  if (HasAttribute(object, name)) {
    parts.push_back(name);
  } else {
    for (int i = 0; HasAttribute(object, absl::StrCat(name, i)); ++i) {
      parts.push_back(absl::StrCat(name, i));
    }
  }
  if (parts.empty()) {
    return absl::NotFoundError(absl::StrCat(path_, ": missing attribute ", object, "@", name));
  }
  std::vector<std::string> out;
  for (const std::string& part : parts) {
    Handle attr(H5Aopen_by_name(id_, object.c_str(), part.c_str(), H5P_DEFAULT, H5P_DEFAULT),
                H5Aclose);
    Handle type(attr.ok() ? H5Aget_type(attr.get()) : -1, H5Tclose);
    Handle space(attr.ok() ? H5Aget_space(attr.get()) : -1, H5Sclose);
    if (!attr.ok() || !type.ok() || !space.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": cannot read attribute ", object, "@", part));
    }
    if (H5Tget_class(type.get()) != H5T_STRING) {
      // Keras writes an empty float array for layers without weights.
      continue;
    }
    const int64_t count = H5Sget_simple_extent_npoints(space.get());
    if (count < 0 || count > kMaxElements) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": attribute ", object, "@", part, " has a bad size"));
    }
    std::vector<std::string> got = ReadStringData(attr.get(), type.get(), count);
    if (static_cast<int64_t>(got.size()) != count) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": cannot read strings of ", object, "@", part));
    }
    out.insert(out.end(), got.begin(), got.end());
  }
  return out;
}

absl::StatusOr<Array> Hdf5File::ReadArray(const std::string& dataset) const {
  if (!Exists(dataset)) {
    return absl::NotFoundError(absl::StrCat(path_, ": missing dataset ", dataset));
  }
  Handle ds(H5Dopen2(id_, dataset.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", dataset, " is not a dataset"));
  }
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  Handle type(H5Dget_type(ds.get()), H5Tclose);
  if (!space.ok() || !type.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": cannot read ", dataset));
  }
  const H5T_class_t cls = H5Tget_class(type.get());
  if (cls != H5T_FLOAT && cls != H5T_INTEGER) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": dataset ", dataset, " is not numeric"));
  }
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0 || rank > 8) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": dataset ", dataset, " has rank ", rank));
  }
  std::vector<hsize_t> dims(rank);
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  Array out;
  int64_t n = 1;
  for (hsize_t d : dims) {
    if (d > static_cast<hsize_t>(kMaxElements) || (n *= static_cast<int64_t>(d)) > kMaxElements) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": dataset ", dataset, " declares an implausible size"));
    }
    out.shape.push_back(static_cast<int64_t>(d));
  }
  out.data.resize(n);
  if (n > 0 &&
      H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data.data()) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": cannot read dataset ", dataset, " (truncated file?)"));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> Hdf5File::Children(const std::string& group) const {
  if (!Exists(group)) return absl::NotFoundError(absl::StrCat(path_, ": missing group ", group));
  Handle g(H5Gopen2(id_, group.c_str(), H5P_DEFAULT), H5Gclose);
  if (!g.ok())
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", group, " is not a group"));
  H5G_info_t info;
  if (H5Gget_info(g.get(), &info) < 0) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": cannot list ", group));
  }
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t len =
        H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (len < 0) continue;
    std::string name(len, '\0');
    H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), len + 1,
                       H5P_DEFAULT);
    names.push_back(std::move(name));
  }
  return names;
}

}  // namespace rnnserve::models::keras
