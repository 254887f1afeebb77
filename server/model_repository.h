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
//
// Confinement: a model directory, config.pbtxt, version directory or file under it that
// resolves (symlinks followed) outside the root is refused, unless allow_outside_root. Reasons
// and source files name paths relative to the root (RelativePath), never absolute ones.
//
// Failures are remembered: a version (or config.pbtxt) that failed is tried again by Poll()
// only once its files change (name, size, modification and status-change times, inode of
// each: the status-change time moves on every write, whatever the modification time says), so
// a file that hangs or crashes the parser costs one check, not one per poll. LoadModel
// (Load()) always tries again. Failure lines are logged with a backoff per model.
//
// State changes are events: Subscribe()'s callbacks run after every load, failed load and
// unload, and once the initial loads are done (server/readiness.h follows them).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "server/log.h"
#include "server/servable.h"

namespace rnnserve::server {

// Whether a model serves: some version loaded (READY), or none (UNAVAILABLE, with a reason).
enum class ModelAvailability { kReady, kUnavailable };
// "READY", "UNAVAILABLE": the names ListModels, the CLI and KServe's RepositoryIndex show.
const char* ModelAvailabilityName(ModelAvailability state);

struct ModelState {
  std::string name;
  std::vector<int64_t> versions;  // loaded, ascending
  ModelAvailability state = ModelAvailability::kUnavailable;
  std::string reason;  // why UNAVAILABLE (or why a version failed)
  std::string platform;
  // Every version the version policy selects is loaded, and config.pbtxt as it is now loaded
  // too: false for an UNAVAILABLE model, and for a READY one whose newest files failed to load
  // (it serves the versions loaded before). Triton's strict readiness asks this of each model.
  bool all_loaded = false;
};

struct RepositoryOptions {
  // How every version is loaded, and where metrics go: options.servable.metrics also gets
  // rnnserve_model_loaded 0 for versions that fail to load or are unloaded. Null metrics:
  // nothing is recorded.
  ServableOptions servable;
  // Serve model files and directories that resolve outside the root (symlinks followed).
  bool allow_outside_root = false;
  // Models LoadAll() and Poll() load side by side (their file checks overlap; the builds take
  // turns); must be positive. As Triton's --model-load-thread-count (4).
  int load_threads = 4;
};

class ModelRepository {
 public:
  // Fails only when `root` is not a readable directory. Loads every model (LoadAll()).
  static absl::StatusOr<std::unique_ptr<ModelRepository>> Open(
      const std::string& root, const RepositoryOptions& options = {});
  // Open() without loading: the server listens first and loads then (LoadAll()).
  static absl::StatusOr<std::unique_ptr<ModelRepository>> Create(
      const std::string& root, const RepositoryOptions& options = {});
  ~ModelRepository();

  // Loads every model of the root, load_threads at a time; returns early once Stop() is called.
  // loaded_all() is true afterwards, also when models failed.
  void LoadAll();
  bool loaded_all() const { return loaded_all_.HasBeenNotified(); }
  // Ends polling, and LoadAll()/Poll() after the model they are loading (a model file check in
  // progress is cut short by CancelModelFileChecks, model_check.h).
  void Stop();

  // version 0: the newest loaded version. NOT_FOUND names what is loaded.
  absl::StatusOr<std::shared_ptr<const Servable>> Get(const std::string& name,
                                                      int64_t version) const;
  std::vector<ModelState> List() const;
  int ready_models() const;

  // Calls `on_change` after every change of a model's state (a load, a failed load, an unload,
  // LoadAll()'s end), on the thread that made it, with none of the repository's locks held.
  // Calls do not overlap, and each reads the state after its change: the last call sees the
  // last state. A callback may read the repository (List(), Get()), never change it or
  // (un)subscribe. Returns the id Unsubscribe takes.
  int Subscribe(std::function<void()> on_change) ABSL_LOCKS_EXCLUDED(observers_mu_);
  // Returns once no call of that callback runs, and none follows.
  void Unsubscribe(int id) ABSL_LOCKS_EXCLUDED(observers_mu_);
  const std::string& root() const { return root_; }
  // `text` with the root's path taken out of every path in it: "<model>/<version>/<file>".
  std::string RelativePath(absl::string_view text) const;

  // (Re)loads <root>/<name>: versions whose files did not change are kept as they are, and
  // failed ones are tried again. NOT_FOUND when the directory is missing; the load's error when
  // no version loads (the versions serving before keep serving then).
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
    std::string fingerprint;  // files' identities: a change means reload
  };
  struct Entry {
    std::map<int64_t, Version> versions;
    std::string config_fingerprint;
    bool config_failed = false;
    std::map<int64_t, std::string> failed;  // version -> fingerprint of the files that failed
    // The files as they are now did not load and the versions loaded before still serve.
    bool newest_failed = false;
    std::string reason;
  };
  ModelRepository(std::string root, RepositoryOptions options);
  // Load(); with retry_failed false (polls), what failed before and did not change is not
  // tried again.
  absl::StatusOr<ModelState> LoadModel(const std::string& name, bool retry_failed)
      ABSL_LOCKS_EXCLUDED(build_mu_, mu_);
  // LoadModel(name, retry_failed false) and a notification for each of `names`, load_threads
  // at a time; returns early once Stop() is called.
  void LoadEach(const std::vector<std::string>& names);
  // The lock that serialises the loads and unloads of `name`.
  std::shared_ptr<absl::Mutex> ModelLock(const std::string& name) ABSL_LOCKS_EXCLUDED(locks_mu_);
  // Unload() without the notification.
  absl::Status UnloadModel(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);
  // OK when every path of the model's selected files stays inside the root (or may leave it).
  absl::Status CheckConfined(const std::string& name, const std::vector<int64_t>& versions) const;
  // A model's load failure, logged with a backoff (repeats of one reason are spaced out).
  void LogLoadFailure(const std::string& name, const std::string& line);
  ModelState StateOf(const std::string& name, const Entry& e) const;
  // rnnserve_model_loaded 0 (when options_ name metrics).
  void ModelLoadFailed(const std::string& name, int64_t version) const;
  void ModelUnloaded(const std::string& name, int64_t version) const;
  // Calls every Subscribe() callback.
  void Changed() ABSL_LOCKS_EXCLUDED(observers_mu_);

  const std::string root_;
  const std::string canonical_root_;  // symlinks resolved
  const RepositoryOptions options_;
  absl::Notification loaded_all_;
  RepeatLimiter failure_log_;
  // A model's lock (ModelLock) serialises its Load/Unload; build_mu_ the in-process part of
  // every version's load (Servable::Load after Servable::CheckFile). Taken in that order, and
  // never held with mu_ by readers.
  absl::Mutex locks_mu_;
  std::map<std::string, std::shared_ptr<absl::Mutex>> model_locks_ ABSL_GUARDED_BY(locks_mu_);
  absl::Mutex build_mu_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> models_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread poller_;
  // Held while the callbacks run, so that Unsubscribe waits for a call in progress.
  absl::Mutex observers_mu_;
  std::map<int, std::function<void()>> observers_ ABSL_GUARDED_BY(observers_mu_);
  int next_observer_ ABSL_GUARDED_BY(observers_mu_) = 0;
};

}  // namespace rnnserve::server
