#include "engine/lengths.h"

#include "absl/strings/str_cat.h"

namespace rnnserve::engine {

absl::Status CheckLengths(absl::Span<const int32_t> lengths, int64_t batch, int64_t steps,
                          absl::string_view what) {
  if (lengths.empty()) return absl::OkStatus();
  if (static_cast<int64_t>(lengths.size()) != batch) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", lengths.size(), " given for a batch of ", batch));
  }
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 0 || lengths[i] > steps) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, "[", i, "] = ", lengths[i], ": must be in [0, ", steps, "]"));
    }
  }
  return absl::OkStatus();
}

}  // namespace rnnserve::engine
