#include "server/model_repository.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <filesystem>

#include "server/client_text.h"
#include "server/model_check.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "server/log.h"
#include "server/metrics/server_metrics.h"
#include "server/model_config.h"

namespace rnnserve::server {

const char* ModelAvailabilityName(ModelAvailability state) {
  return state == ModelAvailability::kReady ? "READY" : "UNAVAILABLE";
}

namespace {

namespace fs = std::filesystem;

std::vector<int64_t> VersionDirs(const fs::path& model_dir) {
  std::vector<int64_t> versions;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(model_dir, ec)) {
    int64_t v;
    if (entry.is_directory() && absl::SimpleAtoi(entry.path().filename().string(), &v) && v > 0) {
      versions.push_back(v);
    }
  }
  std::sort(versions.begin(), versions.end());
  return versions;
}

std::vector<int64_t> SelectVersions(const std::vector<int64_t>& available,
                                    const v1::ModelVersionPolicy& policy) {
  if (policy.has_all()) return available;
  if (policy.has_specific()) {
    std::vector<int64_t> out;
    for (int64_t v : policy.specific().versions()) {
      if (std::find(available.begin(), available.end(), v) != available.end()) out.push_back(v);
    }
    return out;
  }
  const size_t n = std::max<uint32_t>(1, policy.latest().num_versions());
  if (available.size() <= n) return available;
  return std::vector<int64_t>(available.end() - n, available.end());
}

// The identity of one file: name, size, modification and status-change times (ns), inode.
// The status-change time moves on every write and cannot be set back, so a rewrite that keeps
// the size and restores the modification time still changes the identity.
std::string FileIdentity(const fs::path& p, const std::string& shown) {
  struct stat st;
  if (::stat(p.c_str(), &st) != 0) return absl::StrCat(shown, ":missing");
  return absl::StrCat(shown, ":", st.st_size, ":", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec, ":",
                      st.st_ctim.tv_sec, ".", st.st_ctim.tv_nsec, ":", st.st_ino);
}

// The identities of every file under `path` (or of `path` itself if it is a file).
std::string Fingerprint(const fs::path& path) {
  std::error_code ec;
  std::vector<std::string> parts;
  if (fs::is_regular_file(path, ec)) {
    parts.push_back(FileIdentity(path, path.filename().string()));
  } else {
    for (const auto& entry : fs::recursive_directory_iterator(path, ec)) {
      if (entry.is_regular_file()) {
        parts.push_back(FileIdentity(entry.path(), entry.path().lexically_relative(path).string()));
      }
    }
  }
  std::sort(parts.begin(), parts.end());
  return absl::StrJoin(parts, ";");
}

// Whether `p` (symlinks resolved) is `root` or lies under it; `root` is canonical.
bool Inside(const fs::path& root, const fs::path& p) {
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(p, ec);
  if (ec) return false;
  auto r = root.begin();
  auto q = resolved.begin();
  for (; r != root.end(); ++r, ++q) {
    if (q == resolved.end() || *q != *r) return false;
  }
  return true;
}

// The model directories of `root`; with `warn`, a line for each directory whose name is not a
// valid model name (it is skipped).
std::vector<std::string> ModelDirs(const std::string& root, bool warn) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name[0] == '.') continue;
    if (auto s = ValidateModelName(name); !s.ok()) {
      if (warn) LogWarning(absl::StrCat("skipping directory: ", s.message()));
      continue;
    }
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

ModelRepository::ModelRepository(std::string root, RepositoryOptions options)
    : root_(std::move(root)),
      canonical_root_([this] {
        std::error_code ec;
        const fs::path c = fs::canonical(root_, ec);
        return ec ? root_ : c.string();
      }()),
      options_(std::move(options)),
      failure_log_(absl::Minutes(1), absl::Hours(1)) {}

absl::StatusOr<std::unique_ptr<ModelRepository>> ModelRepository::Create(
    const std::string& root, const RepositoryOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    return absl::NotFoundError(absl::StrCat("model repository ", root, " is not a directory"));
  }
  if (options.load_threads <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("load_threads must be positive; was ", options.load_threads));
  }
  return std::unique_ptr<ModelRepository>(new ModelRepository(root, options));
}

absl::StatusOr<std::unique_ptr<ModelRepository>> ModelRepository::Open(
    const std::string& root, const RepositoryOptions& options) {
  auto repo = Create(root, options);
  if (repo.ok()) (*repo)->LoadAll();
  return repo;
}

void ModelRepository::LoadAll() {
  LoadEach(ModelDirs(root_, /*warn=*/true));
  if (!loaded_all_.HasBeenNotified()) loaded_all_.Notify();
  Changed();
}

void ModelRepository::LoadEach(const std::vector<std::string>& names) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < names.size();) {
      if (stop_.HasBeenNotified()) return;
      LoadModel(names[i], /*retry_failed=*/false).IgnoreError();
      Changed();
    }
  };
  std::vector<std::thread> helpers;
  const size_t threads = std::min<size_t>(options_.load_threads, names.size());
  for (size_t t = 1; t < threads; ++t) helpers.emplace_back(work);
  work();
  for (std::thread& t : helpers) t.join();
}

std::shared_ptr<absl::Mutex> ModelRepository::ModelLock(const std::string& name) {
  absl::MutexLock lock(&locks_mu_);
  std::shared_ptr<absl::Mutex>& m = model_locks_[name];
  if (m == nullptr) m = std::make_shared<absl::Mutex>();
  return m;
}

int ModelRepository::Subscribe(std::function<void()> on_change) {
  absl::MutexLock lock(&observers_mu_);
  observers_[next_observer_] = std::move(on_change);
  return next_observer_++;
}

void ModelRepository::Unsubscribe(int id) {
  absl::MutexLock lock(&observers_mu_);
  observers_.erase(id);
}

void ModelRepository::Changed() {
  absl::MutexLock lock(&observers_mu_);
  for (const auto& [id, on_change] : observers_) on_change();
}

void ModelRepository::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
}

std::string ModelRepository::RelativePath(absl::string_view text) const {
  std::vector<std::pair<std::string, std::string>> cut;
  for (const std::string& r : {canonical_root_, root_}) {
    // "." is left alone: "./" also occurs inside "../".
    if (r.empty() || r == "/" || r == "." || r == "./") continue;
    cut.emplace_back(r.back() == '/' ? r : r + "/", "");
  }
  return absl::StrReplaceAll(text, cut);
}

void ModelRepository::LogLoadFailure(const std::string& name, const std::string& line) {
  int64_t held_back = 0;
  if (failure_log_.Allow(name, line, &held_back)) LogError(line + HeldBackSuffix(held_back));
}

absl::Status ModelRepository::CheckConfined(const std::string& name,
                                            const std::vector<int64_t>& versions) const {
  if (options_.allow_outside_root) return absl::OkStatus();
  const fs::path root(canonical_root_);
  const fs::path dir = fs::path(root_) / name;
  std::vector<fs::path> paths = {dir, dir / "config.pbtxt"};
  std::error_code ec;
  for (int64_t v : versions) {
    const fs::path vdir = dir / std::to_string(v);
    paths.push_back(vdir);
    for (auto it = fs::recursive_directory_iterator(vdir, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      paths.push_back(it->path());
    }
  }
  for (const fs::path& p : paths) {
    if (!fs::exists(fs::symlink_status(p, ec))) continue;
    if (!Inside(root, p)) {
      return absl::PermissionDeniedError(
          absl::StrCat(RelativePath(p.string()),
                       " resolves outside the model repository (a symbolic link); not loaded. "
                       "--allow-symlinks-outside-repository serves such links"));
    }
  }
  return absl::OkStatus();
}

void ModelRepository::ModelLoadFailed(const std::string& name, int64_t version) const {
  if (options_.servable.metrics != nullptr)
    options_.servable.metrics->ModelLoadFailed(name, version);
}

void ModelRepository::ModelUnloaded(const std::string& name, int64_t version) const {
  if (options_.servable.metrics != nullptr) options_.servable.metrics->ModelUnloaded(name, version);
}

ModelRepository::~ModelRepository() {
  Stop();
  if (poller_.joinable()) poller_.join();
}

absl::StatusOr<ModelState> ModelRepository::Load(const std::string& name) {
  absl::StatusOr<ModelState> state = LoadModel(name, /*retry_failed=*/true);
  Changed();
  return state;
}

absl::StatusOr<ModelState> ModelRepository::LoadModel(const std::string& name, bool retry_failed) {
  if (auto s = ValidateModelName(name); !s.ok()) return s;
  const std::shared_ptr<absl::Mutex> model_lock = ModelLock(name);
  absl::MutexLock serial(model_lock.get());
  const fs::path dir = fs::path(root_) / name;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat("no model directory '", name, "' in the model repository"));
  }
  Entry old;
  {
    absl::MutexLock lock(&mu_);
    auto it = models_.find(name);
    if (it != models_.end()) old = it->second;
  }
  Entry next;
  next.config_fingerprint = Fingerprint(dir / "config.pbtxt");
  const bool config_changed = next.config_fingerprint != old.config_fingerprint;
  if (!retry_failed && !config_changed && old.config_failed) {
    // The config that failed has not changed: nothing to try again, nothing to log again.
    return absl::FailedPreconditionError(
        absl::StrCat("model '", name, "' failed to load: ", old.reason));
  }
  absl::StatusOr<v1::ModelConfig> config = ReadModelConfig(dir.string());
  next.config_failed = !config.ok();
  bool tried = !config.ok();  // something was parsed or checked that failed, or loaded
  std::vector<int64_t> versions;
  if (config.ok()) {
    config->set_name(name);
    versions = SelectVersions(VersionDirs(dir), config->version_policy());
    if (absl::Status confined = CheckConfined(name, versions); !confined.ok()) config = confined;
  }
  if (!config.ok()) {
    tried = true;
    next.reason = RelativePath(config.status().message());
  } else {
    if (versions.empty()) {
      next.reason = absl::StrCat(name, ": no version to load");
      tried = true;
    }
    for (int64_t v : versions) {
      Version version;
      version.fingerprint = Fingerprint(dir / std::to_string(v));
      auto kept = old.versions.find(v);
      if (!config_changed && kept != old.versions.end() &&
          kept->second.fingerprint == version.fingerprint) {
        next.versions[v] = kept->second;
        continue;
      }
      if (auto failed = old.failed.find(v); !retry_failed && !config_changed &&
                                            failed != old.failed.end() &&
                                            failed->second == version.fingerprint) {
        // Failed before and the files did not change: not parsed again.
        next.failed[v] = version.fingerprint;
        if (next.reason.empty()) next.reason = old.reason;
        continue;
      }
      tried = true;
      const absl::Time start = absl::Now();
      // The file check first, beside other models' loads; then the build, in turn. A version
      // that loads reports itself to the metrics (ServableOptions::metrics).
      absl::StatusOr<std::unique_ptr<Servable>> servable = absl::UnknownError("not loaded");
      if (absl::Status checked = Servable::CheckFile(dir.string(), v, *config); !checked.ok()) {
        servable = checked;
      } else {
        absl::MutexLock build(&build_mu_);
        servable = Servable::Load(dir.string(), v, *config, options_.servable);
      }
      if (!servable.ok()) {
        next.reason = RelativePath(servable.status().message());
        next.failed[v] = version.fingerprint;
        LogLoadFailure(name,
                       absl::StrCat("model ", name, " v", v, " failed to load: ", next.reason));
        // metrics: a version that serves now keeps rnnserve_model_loaded 1 until it is dropped.
        if (!old.versions.contains(v)) ModelLoadFailed(name, v);
        continue;
      }
      LogInfo(absl::StrCat("model ", name, " v", v, " loaded from ",
                           RelativePath((*servable)->source_file()), " in ",
                           absl::FormatDuration(absl::Now() - start)));
      version.servable = ShareServable(*std::move(servable));
      next.versions[v] = std::move(version);
    }
  }
  if (!next.versions.empty() && next.failed.empty()) failure_log_.Forget(name);
  if (next.versions.empty() && !old.versions.empty()) {
    // Nothing new loads: keep serving what served, and say why the load failed.
    if (tried && next.failed.empty()) {  // a version's failure was logged as it happened
      LogLoadFailure(name,
                     absl::StrCat("model ", name, " keeps its loaded versions: ", next.reason));
    }
    absl::MutexLock lock(&mu_);
    Entry& e = models_[name];
    e.reason = next.reason;
    e.failed = next.failed;
    e.newest_failed = true;
    return absl::FailedPreconditionError(
        absl::StrCat("model '", name, "' did not reload: ", next.reason));
  }
  if (next.versions.empty() && tried && next.failed.empty()) {
    LogLoadFailure(name, absl::StrCat("model ", name, " is unavailable: ", next.reason));
  }
  ModelState state = StateOf(name, next);
  {  // metrics: rnnserve_model_loaded 0 for a config that fails; versions dropped leave the page
    if (!config.ok()) ModelLoadFailed(name, 0);
    for (const auto& [v, version] : old.versions) {
      if (!next.versions.contains(v)) ModelUnloaded(name, v);
    }
  }
  {
    absl::MutexLock lock(&mu_);
    models_[name] = std::move(next);
  }
  if (state.versions.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", name, "' failed to load: ", state.reason));
  }
  return state;
}

absl::Status ModelRepository::Unload(const std::string& name) {
  absl::Status unloaded = UnloadModel(name);
  if (unloaded.ok()) Changed();
  return unloaded;
}

absl::Status ModelRepository::UnloadModel(const std::string& name) {
  if (auto s = ValidateModelName(name); !s.ok()) return s;
  const std::shared_ptr<absl::Mutex> model_lock = ModelLock(name);
  absl::MutexLock serial(model_lock.get());
  absl::MutexLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) {
    return absl::NotFoundError(absl::StrCat("model '", name, "' is not loaded"));
  }
  // metrics: the model's series leave the page, failed versions' included
  for (const auto& [v, version] : it->second.versions) ModelUnloaded(name, v);
  for (const auto& [v, fingerprint] : it->second.failed) ModelUnloaded(name, v);
  if (it->second.config_failed) ModelUnloaded(name, 0);
  models_.erase(it);
  failure_log_.Forget(name);
  LogInfo(absl::StrCat("model ", name, " unloaded"));
  return absl::OkStatus();
}

void ModelRepository::Poll() {
  if (stop_.HasBeenNotified()) return;
  const std::vector<std::string> present = ModelDirs(root_, /*warn=*/false);
  std::vector<std::string> gone;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, e] : models_) {
      if (!std::binary_search(present.begin(), present.end(), name)) gone.push_back(name);
    }
  }
  for (const std::string& name : gone) Unload(name).IgnoreError();
  // Load() keeps unchanged versions, so this reloads only what changed on disk.
  LoadEach(present);
}

void ModelRepository::StartPolling(int seconds) {
  if (seconds <= 0 || poller_.joinable()) return;
  poller_ = std::thread([this, seconds] {
    while (!stop_.WaitForNotificationWithTimeout(absl::Seconds(seconds))) Poll();
  });
}

ModelState ModelRepository::StateOf(const std::string& name, const Entry& e) const {
  ModelState s;
  s.name = name;
  for (const auto& [v, version] : e.versions) {
    s.versions.push_back(v);
    s.platform = version.servable->platform();
  }
  s.state = e.versions.empty() ? ModelAvailability::kUnavailable : ModelAvailability::kReady;
  s.reason = e.reason;
  s.all_loaded = !e.versions.empty() && e.failed.empty() && !e.config_failed && !e.newest_failed;
  return s;
}

absl::StatusOr<std::shared_ptr<const Servable>> ModelRepository::Get(const std::string& name,
                                                                     int64_t version) const {
  if (auto s = ValidateModelName(name); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) {
    std::vector<std::string> names;
    for (const auto& [n, e] : models_) {
      if (!e.versions.empty()) names.push_back(n);
    }
    return absl::NotFoundError(absl::StrCat(
        "model '", name,
        "' is not loaded (loaded: ", names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
  }
  const Entry& e = it->second;
  if (e.versions.empty()) {
    return absl::UnavailableError(absl::StrCat("model '", name, "' failed to load: ", e.reason));
  }
  if (version == 0) return e.versions.rbegin()->second.servable;
  auto v = e.versions.find(version);
  if (v == e.versions.end()) {
    std::vector<int64_t> have;
    for (const auto& [n, s] : e.versions) have.push_back(n);
    return absl::NotFoundError(absl::StrCat("model '", name, "' has no version ", version,
                                            " loaded (loaded: ", absl::StrJoin(have, ", "), ")"));
  }
  return v->second.servable;
}

std::vector<ModelState> ModelRepository::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<ModelState> out;
  for (const auto& [name, e] : models_) out.push_back(StateOf(name, e));
  return out;
}

int ModelRepository::ready_models() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [name, e] : models_) n += e.versions.empty() ? 0 : 1;
  return n;
}

}  // namespace rnnserve::server
