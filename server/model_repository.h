#pragma once

// The model repository: <root>/<model>/config.pbtxt and <root>/<model>/<version>/<file>.
//
// Open() scans the root and loads every model's versions that its version policy selects
// (latest 1 by default). A model that fails to load is kept as UNAVAILABLE with the reason,
// and the others serve.
//
// Servables are handed out as shared_ptr: a request that holds one keeps that version alive
// while it runs. Load() builds the new versions outside the lock and swaps them in at once, so a
// reload under load fails no request: new requests get the new version, running ones finish on
// the old, which is destroyed when its last request lets go. Loads are serialised.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "server/servable.h"

namespace rnnserve::server {

struct ModelState {
  std::string name;
  std::vector<int64_t> versions;  // loaded, ascending
  std::string state;              // "READY" or "UNAVAILABLE"
  std::string reason;             // why UNAVAILABLE (or why a version failed)
  std::string platform;
};

struct RepositoryOptions {
  // How every version is loaded, and where metrics go: options.servable.metrics also gets
  // rnnserve_model_loaded 0 for versions that fail to load or are unloaded. Null metrics:
  // nothing is recorded.
  ServableOptions servable;
};

class ModelRepository {
 public:
  // Fails only when `root` is not a readable directory.
  static absl::StatusOr<std::unique_ptr<ModelRepository>> Open(
      const std::string& root, const RepositoryOptions& options = {});
  ~ModelRepository();

  // version 0: the newest loaded version. NOT_FOUND names what is loaded.
  absl::StatusOr<std::shared_ptr<const Servable>> Get(const std::string& name,
                                                      int64_t version) const;
  std::vector<ModelState> List() const;
  int ready_models() const;
  const std::string& root() const { return root_; }

  // (Re)loads <root>/<name>: versions whose files did not change are kept as they are.
  // NOT_FOUND when the directory is missing; the load's error when no version loads (the
  // versions serving before keep serving then).
  absl::StatusOr<ModelState> Load(const std::string& name);
  // Stops serving `name`; requests holding a version finish on it.
  absl::Status Unload(const std::string& name);
  // Rescans the root: loads new models, reloads changed ones, unloads removed ones.
  void Poll();
  // Calls Poll() every `seconds` on a thread of its own until destruction. 0: never.
  void StartPolling(int seconds);

 private:
  struct Version {
    std::shared_ptr<const Servable> servable;
    std::string fingerprint;  // files' sizes and times: a change means reload
  };
  struct Entry {
    std::map<int64_t, Version> versions;
    std::string config_fingerprint;
    std::string reason;
  };
  ModelRepository(std::string root, RepositoryOptions options)
      : root_(std::move(root)), options_(std::move(options)) {}
  ModelState StateOf(const std::string& name, const Entry& e) const;
  // rnnserve_model_loaded 0 (when options_ name metrics).
  void ModelLoadFailed(const std::string& name, int64_t version) const;
  void ModelUnloaded(const std::string& name, int64_t version) const;

  const std::string root_;
  const RepositoryOptions options_;
  absl::Mutex load_mu_;  // serialises Load/Unload/Poll; never held with mu_ by readers
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> models_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread poller_;
};

}  // namespace rnnserve::server
