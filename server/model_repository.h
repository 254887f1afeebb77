#pragma once

// The model repository: <root>/<model>/config.pbtxt and <root>/<model>/<version>/<file>.
//
// Open() scans the root and loads every model's versions that its version policy selects
// (latest 1 by default). A model that fails to load is kept as UNAVAILABLE with the reason,
// and the others serve. Servables are handed out as shared_ptr, so a request that holds one
// keeps that version alive while it runs.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/servable.h"

namespace rnnserve::server {

struct ModelState {
  std::string name;
  std::vector<int64_t> versions;  // loaded, ascending
  std::string state;              // "READY" or "UNAVAILABLE"
  std::string reason;             // why UNAVAILABLE
  std::string platform;
};

class ModelRepository {
 public:
  // Fails only when `root` is not a readable directory.
  static absl::StatusOr<std::unique_ptr<ModelRepository>> Open(const std::string& root);

  // version 0: the newest loaded version. NOT_FOUND names what is loaded.
  absl::StatusOr<std::shared_ptr<const Servable>> Get(const std::string& name,
                                                      int64_t version) const;
  std::vector<ModelState> List() const;
  int ready_models() const;

 private:
  struct Entry {
    std::map<int64_t, std::shared_ptr<const Servable>> versions;
    std::string reason;
  };
  explicit ModelRepository(std::string root) : root_(std::move(root)) {}
  void LoadModel(const std::string& name);

  const std::string root_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rnnserve::server
