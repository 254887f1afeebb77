#include "server/model_config_triton.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/log.h"

namespace rnnserve::server {
namespace {

// Triton's ModelConfig fields (and those of the messages we share with it) that rnnserve does
// not define, by our message type: accepted and ignored.
const std::map<std::string, std::set<std::string>>& TritonOnlyFields() {
  static const auto* fields = new std::map<std::string, std::set<std::string>>{
      {"rnnserve.v1.ModelConfig",
       {"backend", "runtime", "model_warmup", "response_cache", "model_transaction_policy",
        "ensemble_scheduling", "model_operations", "model_repository_agents", "batch_input",
        "batch_output", "label_filename"}},
      {"rnnserve.v1.ModelTensor",
       {"format", "reshape", "is_shape_tensor", "allow_ragged_batch", "optional", "label_filename",
        "is_non_linear_format_io"}},
      {"rnnserve.v1.ModelInstanceGroup",
       {"profile", "passive", "host_policy", "rate_limiter", "secondary_devices"}},
      {"rnnserve.v1.ModelDynamicBatching",
       {"preserve_ordering", "default_queue_policy", "priority_queue_policy"}},
      {"rnnserve.v1.ModelSequenceBatching",
       {"control_input", "state", "direct", "oldest", "iterative_sequence"}},
  };
  return *fields;
}

// (where, what) pairs already logged.
class Once {
 public:
  bool First(const std::string& where, const std::string& what) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (seen_.size() > 10000) seen_.clear();  // bounded, whatever the repository holds
    return seen_.insert(where + "\n" + what).second;
  }

 private:
  absl::Mutex mu_;
  std::set<std::string> seen_ ABSL_GUARDED_BY(mu_);
};

Once& Logged() {
  static Once* once = new Once;
  return *once;
}

bool IsTritonOnlyField(const std::string& name) {
  for (const auto& [type, fields] : TritonOnlyFields()) {
    if (fields.count(name)) return true;
  }
  return false;
}

bool IdentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

std::string ColonBeforeTritonLists(const std::string& text) {
  std::string out;
  out.reserve(text.size() + 16);
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"' || c == '\'') {  // a string, with its escapes
      size_t j = i + 1;
      while (j < text.size() && text[j] != c && text[j] != '\n') j += text[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, text.size());
      out.append(text, i, j - i);
      i = j;
    } else if (c == '#') {  // a comment, to the end of the line
      size_t j = text.find('\n', i);
      j = j == std::string::npos ? text.size() : j;
      out.append(text, i, j - i);
      i = j;
    } else if (IdentChar(c) && (i == 0 || !IdentChar(text[i - 1]))) {
      size_t j = i;
      while (j < text.size() && IdentChar(text[j])) ++j;
      const std::string ident = text.substr(i, j - i);
      out += ident;
      size_t k = j;
      while (k < text.size() &&
             (text[k] == ' ' || text[k] == '\t' || text[k] == '\n' || text[k] == '\r')) {
        ++k;
      }
      if (k < text.size() && text[k] == '[' && IsTritonOnlyField(ident)) out += ':';
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

absl::Status AcceptTritonFields(const std::vector<UnknownConfigField>& unknown,
                                const std::string& where) {
  for (const UnknownConfigField& u : unknown) {
    auto it = TritonOnlyFields().find(u.message_type);
    if (it == TritonOnlyFields().end() || !it->second.count(u.field)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": line ", u.line, ":", u.column,
                                                     ": Message type \"", u.message_type,
                                                     "\" has no field named \"", u.field, "\"."));
    }
  }
  for (const UnknownConfigField& u : unknown) {
    const std::string what = absl::StrCat(u.message_type, ".", u.field);
    if (!Logged().First(where, what)) continue;
    if (u.field == "backend" && u.message_type == "rnnserve.v1.ModelConfig") {
      LogInfo(absl::StrCat(where, ": line ", u.line,
                           ": backend ignored (rnnserve runs the model "
                           "itself; the format comes from platform or the model file)"));
    } else {
      LogWarning(absl::StrCat(where, ": line ", u.line, ": Triton's '", u.field,
                              "' is not used by rnnserve; ignored"));
    }
  }
  return absl::OkStatus();
}

void WarnNameDiffers(const std::string& config_name, const std::string& dir_name,
                     const std::string& where) {
  if (config_name.empty() || config_name == dir_name) return;
  if (!Logged().First(where, absl::StrCat("name ", config_name))) return;
  LogWarning(absl::StrCat(where, ": name '", config_name, "' differs from its directory '",
                          dir_name, "'; the model is served as '", dir_name, "'"));
}

}  // namespace rnnserve::server
