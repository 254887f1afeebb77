#include "server/model_repository.h"

#include "server/client_text.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/log.h"
#include "server/metrics/server_metrics.h"
#include "server/model_config.h"

namespace rnnserve::server {
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

// Size and modification time of every file under `dir` (or of `dir` itself if it is a file).
std::string Fingerprint(const fs::path& path) {
  std::error_code ec;
  std::vector<std::string> parts;
  auto add = [&](const fs::path& p) {
    const auto size = fs::file_size(p, ec);
    const auto time = fs::last_write_time(p, ec).time_since_epoch().count();
    parts.push_back(absl::StrCat(p.filename().string(), ":", ec ? 0 : size, ":", time));
  };
  if (fs::is_regular_file(path, ec)) {
    add(path);
  } else {
    for (const auto& entry : fs::recursive_directory_iterator(path, ec)) {
      if (entry.is_regular_file()) add(entry.path());
    }
  }
  std::sort(parts.begin(), parts.end());
  return absl::StrJoin(parts, ";");
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

absl::StatusOr<std::unique_ptr<ModelRepository>> ModelRepository::Open(
    const std::string& root, const RepositoryOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    return absl::NotFoundError(absl::StrCat("model repository ", root, " is not a directory"));
  }
  std::unique_ptr<ModelRepository> repo(new ModelRepository(root, options));
  for (const std::string& name : ModelDirs(root, /*warn=*/true)) repo->Load(name).IgnoreError();
  return repo;
}

void ModelRepository::ModelLoadFailed(const std::string& name, int64_t version) const {
  if (options_.servable.metrics != nullptr)
    options_.servable.metrics->ModelLoadFailed(name, version);
}

void ModelRepository::ModelUnloaded(const std::string& name, int64_t version) const {
  if (options_.servable.metrics != nullptr) options_.servable.metrics->ModelUnloaded(name, version);
}

ModelRepository::~ModelRepository() {
  stop_.Notify();
  if (poller_.joinable()) poller_.join();
}

absl::StatusOr<ModelState> ModelRepository::Load(const std::string& name) {
  if (auto s = ValidateModelName(name); !s.ok()) return s;
  absl::MutexLock serial(&load_mu_);
  const fs::path dir = fs::path(root_) / name;
  std::error_code ec;
  if (name.empty() || name.find('/') != std::string::npos || name[0] == '.' ||
      !fs::is_directory(dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat("no model directory '", name, "' in the repository ", root_));
  }
  Entry old;
  {
    absl::MutexLock lock(&mu_);
    auto it = models_.find(name);
    if (it != models_.end()) old = it->second;
  }
  Entry next;
  next.config_fingerprint = Fingerprint(dir / "config.pbtxt");
  auto config = ReadModelConfig(dir.string());
  if (!config.ok()) {
    next.reason = std::string(config.status().message());
  } else {
    config->set_name(name);
    const bool config_changed = next.config_fingerprint != old.config_fingerprint;
    const std::vector<int64_t> versions =
        SelectVersions(VersionDirs(dir), config->version_policy());
    if (versions.empty()) next.reason = absl::StrCat(dir.string(), ": no version to load");
    for (int64_t v : versions) {
      Version version;
      version.fingerprint = Fingerprint(dir / std::to_string(v));
      auto kept = old.versions.find(v);
      if (!config_changed && kept != old.versions.end() &&
          kept->second.fingerprint == version.fingerprint) {
        next.versions[v] = kept->second;
        continue;
      }
      const absl::Time start = absl::Now();
      // A version that loads reports itself to the metrics (ServableOptions::metrics).
      auto servable = Servable::Load(dir.string(), v, *config, options_.servable);
      if (!servable.ok()) {
        next.reason = std::string(servable.status().message());
        LogError(absl::StrCat("model ", name, " v", v, " failed to load: ", next.reason));
        // metrics: a version that serves now keeps rnnserve_model_loaded 1 until it is dropped.
        if (!old.versions.contains(v)) ModelLoadFailed(name, v);
        continue;
      }
      LogInfo(absl::StrCat("model ", name, " v", v, " loaded from ", (*servable)->source_file(),
                           " in ", absl::FormatDuration(absl::Now() - start)));
      version.servable = std::move(*servable);
      next.versions[v] = std::move(version);
    }
  }
  if (next.versions.empty() && !old.versions.empty()) {
    // Nothing new loads: keep serving what served, and say why the load failed.
    LogError(absl::StrCat("model ", name, " keeps its loaded versions: ", next.reason));
    absl::MutexLock lock(&mu_);
    models_[name].reason = next.reason;
    return absl::FailedPreconditionError(
        absl::StrCat("model '", name, "' did not reload: ", next.reason));
  }
  if (next.versions.empty())
    LogError(absl::StrCat("model ", name, " is unavailable: ", next.reason));
  ModelState state = StateOf(name, next);
  {  // metrics: rnnserve_model_loaded 0 for a config that fails and for versions dropped
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
  if (auto s = ValidateModelName(name); !s.ok()) return s;
  absl::MutexLock serial(&load_mu_);
  absl::MutexLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) {
    return absl::NotFoundError(absl::StrCat("model '", name, "' is not loaded"));
  }
  for (const auto& [v, version] : it->second.versions) {
    ModelUnloaded(name, v);  // metrics: model_loaded 0
  }
  models_.erase(it);
  LogInfo(absl::StrCat("model ", name, " unloaded"));
  return absl::OkStatus();
}

void ModelRepository::Poll() {
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
  for (const std::string& name : present) Load(name).IgnoreError();
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
  s.state = e.versions.empty() ? "UNAVAILABLE" : "READY";
  s.reason = e.reason;
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
