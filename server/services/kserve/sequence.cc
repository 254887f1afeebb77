#include "server/services/kserve/sequence.h"

#include "absl/strings/str_cat.h"

namespace rnnserve::server::kserve {
namespace {

using inference::InferParameter;

absl::StatusOr<bool> BoolParam(const InferParameters& parameters, const std::string& name) {
  auto it = parameters.find(name);
  if (it == parameters.end()) return false;
  if (it->second.parameter_choice_case() != InferParameter::kBoolParam) {
    return absl::InvalidArgumentError(absl::StrCat("parameter '", name, "': must be a bool_param"));
  }
  return it->second.bool_param();
}

}  // namespace

std::string SequenceIdentity::ToString() const {
  return string_id.empty() ? absl::StrCat(id) : absl::StrCat("'", string_id, "'");
}

absl::StatusOr<std::optional<SequenceIdentity>> ParseSequence(const InferParameters& parameters) {
  SequenceIdentity seq;
  auto start = BoolParam(parameters, "sequence_start");
  if (!start.ok()) return start.status();
  auto end = BoolParam(parameters, "sequence_end");
  if (!end.ok()) return end.status();
  seq.start = *start;
  seq.end = *end;
  auto it = parameters.find("sequence_id");
  if (it != parameters.end()) {
    const InferParameter& p = it->second;
    switch (p.parameter_choice_case()) {
      case InferParameter::kInt64Param:
        if (p.int64_param() < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("parameter 'sequence_id': must not be negative; was ", p.int64_param()));
        }
        seq.id = static_cast<uint64_t>(p.int64_param());
        break;
      case InferParameter::kUint64Param:
        seq.id = p.uint64_param();
        break;
      case InferParameter::kStringParam:
        seq.string_id = p.string_param();
        break;
      default:
        return absl::InvalidArgumentError(
            "parameter 'sequence_id': must be an int64_param, uint64_param or string_param");
    }
  }
  if (seq.id == 0 && seq.string_id.empty()) {
    if (seq.start || seq.end) {
      return absl::InvalidArgumentError(
          "parameters 'sequence_start' / 'sequence_end' need a non-zero 'sequence_id'");
    }
    return std::nullopt;
  }
  return seq;
}

}  // namespace rnnserve::server::kserve
