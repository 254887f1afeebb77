#include "server/model_check.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <set>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "models/training_config.h"

extern char** environ;

namespace rnnserve::server {
namespace {

struct CheckSettings {
  absl::Mutex mu;
  std::string binary;
  absl::Duration limit = absl::ZeroDuration();
  std::atomic<bool> cancelled{false};
  // Checks that passed, by CheckKey, each taken by the next check of the same unchanged file
  // (Servable::CheckFile, then Servable::Load). Bounded by the checks in progress.
  std::set<std::string> passed ABSL_GUARDED_BY(mu);
};

// The file, how it is parsed, and its identity (size, modification and status-change times,
// inode): a file rewritten after its check passed is checked again.
std::string CheckKey(const std::string& file, const models::LoadOptions& options) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return "";
  return absl::StrCat(file, "\n", options.format, "\n", options.architecture_json_path, "\n",
                      st.st_size, ":", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec, ":",
                      st.st_ctim.tv_sec, ".", st.st_ctim.tv_nsec, ":", st.st_ino);
}

CheckSettings& Settings() {
  static CheckSettings* const settings = new CheckSettings();
  return *settings;
}

}  // namespace

void EnableModelFileCheck(std::string binary, absl::Duration limit) {
  CheckSettings& s = Settings();
  absl::MutexLock lock(&s.mu);
  s.binary = std::move(binary);
  s.limit = limit;
}

void CancelModelFileChecks() { Settings().cancelled = true; }

absl::Status CheckModelFile(const std::string& file, const models::LoadOptions& options) {
  auto cancelled = [&file] {
    return absl::CancelledError(absl::StrCat(file, ": not loaded: the server is shutting down"));
  };
  if (Settings().cancelled) return cancelled();
  std::string binary;
  absl::Duration limit;
  const std::string key = CheckKey(file, options);
  {
    CheckSettings& s = Settings();
    absl::MutexLock lock(&s.mu);
    binary = s.binary;
    limit = s.limit;
    if (!key.empty() && s.passed.erase(key) > 0) return absl::OkStatus();
  }
  if (binary.empty() || limit <= absl::ZeroDuration()) return absl::OkStatus();
  std::vector<std::string> args = {binary, "--check-model", file};
  if (!options.format.empty()) args.insert(args.end(), {"--format", options.format});
  if (!options.architecture_json_path.empty()) {
    args.insert(args.end(), {"--architecture", options.architecture_json_path});
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The child's output is not wanted (the in-process parse reports its errors): /dev/null.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  // The server blocks SIGINT/SIGTERM for sigwait; the child takes the default actions.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int err = posix_spawn(&pid, binary.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (err != 0) {
    return absl::InternalError(
        absl::StrCat(file, ": cannot start the model file check (", binary, "): errno ", err));
  }
  const absl::Time deadline = absl::Now() + limit;
  int status = 0;
  for (absl::Duration wait = absl::Milliseconds(1);;
       wait = std::min(wait * 2, absl::Milliseconds(50))) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0) return absl::InternalError(absl::StrCat(file, ": lost the model file check"));
    if (Settings().cancelled) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return cancelled();
    }
    if (absl::Now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return absl::DeadlineExceededError(
          absl::StrCat(file, ": parsing did not finish within ", absl::FormatDuration(limit),
                       " (a corrupt file can make the parser loop forever); not loaded. "
                       "--model-check-seconds sets the limit"));
    }
    absl::SleepFor(wait);
  }
  if (WIFSIGNALED(status)) {
    return absl::InternalError(absl::StrCat(file, ": parsing it crashed the model file check (",
                                            strsignal(WTERMSIG(status)), "); not loaded"));
  }
  if (!key.empty()) {
    CheckSettings& s = Settings();
    absl::MutexLock lock(&s.mu);
    if (s.passed.size() >= 1024) s.passed.clear();  // files rewritten after their checks
    s.passed.insert(key);
  }
  return absl::OkStatus();
}

int RunModelCheck(int argc, char** argv) {
  // The child ends with the server, however the server ends (a check of a file that hangs the
  // parser would otherwise outlive it).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  std::string file;
  models::LoadOptions options;
  CLI::App app(
      "The model file check's child: parses one model file and exits 0 (parsed) or 1 "
      "(rejected, the error on stderr)",
      "rnnserve --check-model");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("FILE", file, "the model file (.h5, .keras, .onnx) or SavedModel directory")
      ->required();
  app.add_option("--format", options.format, "the file's format, as config.pbtxt's platform");
  app.add_option("--architecture", options.architecture_json_path,
                 "a Keras architecture JSON for a weights-only .h5");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  auto model = models::LoadModelFile(file, options);
  (void)models::ReadTrainingConfig(file);  // reads the file's attributes too
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace rnnserve::server
