#pragma once

// A small read-only view of an HDF5 file: the attributes and datasets Keras writes.
// Every error names the file and the object.

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rnnserve::models::keras {

// A float array read from a dataset, row-major.
struct Array {
  std::vector<int64_t> shape;
  std::vector<float> data;
  int64_t size() const { return static_cast<int64_t>(data.size()); }
};

class Hdf5File {
 public:
  static absl::StatusOr<Hdf5File> Open(const std::string& path);
  // Opens an in-memory file image (a zip member); `name` is used in messages. The bytes are
  // copied by HDF5 and need not outlive the call.
  static absl::StatusOr<Hdf5File> OpenImage(const std::string& bytes, const std::string& name);
  Hdf5File(Hdf5File&& other) noexcept;
  Hdf5File& operator=(Hdf5File&&) = delete;
  Hdf5File(const Hdf5File&) = delete;
  ~Hdf5File();

  const std::string& path() const { return path_; }
  bool Exists(const std::string& object) const;
  bool IsGroup(const std::string& object) const;
  bool HasAttribute(const std::string& object, const std::string& name) const;
  // A string attribute (fixed or variable length).
  absl::StatusOr<std::string> ReadString(const std::string& object, const std::string& name) const;
  // A string-array attribute; Keras splits long ones into name0, name1, ... which are joined.
  absl::StatusOr<std::vector<std::string>> ReadStrings(const std::string& object,
                                                       const std::string& name) const;
  // Any numeric dataset, converted to float32.
  absl::StatusOr<Array> ReadArray(const std::string& dataset) const;
  // Names of a group's members, in creation order where the file tracks it.
  absl::StatusOr<std::vector<std::string>> Children(const std::string& group) const;

 private:
  Hdf5File(std::string path, hid_t id) : path_(std::move(path)), id_(id) {}
  std::string path_;
  hid_t id_ = -1;
};

}  // namespace rnnserve::models::keras
