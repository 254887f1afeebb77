#include "server/model_repository.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/log.h"
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

}  // namespace

absl::StatusOr<std::unique_ptr<ModelRepository>> ModelRepository::Open(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    return absl::NotFoundError(absl::StrCat("model repository ", root, " is not a directory"));
  }
  std::unique_ptr<ModelRepository> repo(new ModelRepository(root));
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (entry.is_directory()) names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) repo->LoadModel(name);
  return repo;
}

void ModelRepository::LoadModel(const std::string& name) {
  const fs::path dir = fs::path(root_) / name;
  Entry entry;
  auto config = ReadModelConfig(dir.string());
  if (!config.ok()) {
    entry.reason = std::string(config.status().message());
  } else {
    config->set_name(name);
    const std::vector<int64_t> versions =
        SelectVersions(VersionDirs(dir), config->version_policy());
    if (versions.empty()) entry.reason = absl::StrCat(dir.string(), ": no version to load");
    for (int64_t v : versions) {
      const absl::Time start = absl::Now();
      auto servable = Servable::Load(dir.string(), v, *config);
      if (!servable.ok()) {
        entry.reason = std::string(servable.status().message());
        LogError(absl::StrCat("model ", name, " v", v, " failed to load: ", entry.reason));
        continue;
      }
      LogInfo(absl::StrCat("model ", name, " v", v, " loaded from ", (*servable)->source_file(),
                           " in ", absl::FormatDuration(absl::Now() - start)));
      entry.versions[v] = std::move(*servable);
    }
  }
  if (entry.versions.empty() && !entry.reason.empty()) {
    LogError(absl::StrCat("model ", name, " is unavailable: ", entry.reason));
  }
  absl::MutexLock lock(&mu_);
  models_[name] = std::move(entry);
}

absl::StatusOr<std::shared_ptr<const Servable>> ModelRepository::Get(const std::string& name,
                                                                     int64_t version) const {
  absl::MutexLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) {
    std::vector<std::string> names;
    for (const auto& [n, e] : models_) {
      if (!e.versions.empty()) names.push_back(n);
    }
    return absl::NotFoundError(absl::StrCat("model '", name, "' is not loaded (loaded: ",
                                            names.empty() ? "none" : absl::StrJoin(names, ", "),
                                            ")"));
  }
  const Entry& e = it->second;
  if (e.versions.empty()) {
    return absl::UnavailableError(absl::StrCat("model '", name, "' failed to load: ", e.reason));
  }
  if (version == 0) return e.versions.rbegin()->second;
  auto v = e.versions.find(version);
  if (v == e.versions.end()) {
    std::vector<int64_t> have;
    for (const auto& [n, s] : e.versions) have.push_back(n);
    return absl::NotFoundError(absl::StrCat("model '", name, "' has no version ", version,
                                            " loaded (loaded: ", absl::StrJoin(have, ", "), ")"));
  }
  return v->second;
}

std::vector<ModelState> ModelRepository::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<ModelState> out;
  for (const auto& [name, e] : models_) {
    ModelState s;
    s.name = name;
    for (const auto& [v, servable] : e.versions) {
      s.versions.push_back(v);
      s.platform = servable->platform();
    }
    s.state = e.versions.empty() ? "UNAVAILABLE" : "READY";
    s.reason = e.reason;
    out.push_back(std::move(s));
  }
  return out;
}

int ModelRepository::ready_models() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [name, e] : models_) n += e.versions.empty() ? 0 : 1;
  return n;
}

}  // namespace rnnserve::server
