#include "engine/plan/masks.h"

#include <algorithm>

namespace rnnserve::engine::plan {

void MaskFromSteps(const std::vector<uint8_t>& valid, int64_t B, int64_t T,
                   std::vector<int32_t>* lengths, std::vector<uint8_t>* step_mask) {
  lengths->assign(B, 0);
  bool interior = false;
  for (int64_t b = 0; b < B; ++b) {
    int32_t len = 0;
    for (int64_t t = 0; t < T; ++t) {
      if (valid[b * T + t]) len = static_cast<int32_t>(t + 1);
    }
    for (int64_t t = 0; t < len; ++t) interior |= !valid[b * T + t];
    (*lengths)[b] = len;
  }
  if (interior) {
    *step_mask = valid;
  } else {
    step_mask->clear();
  }
}

void MergeMasks(absl::Span<const MaskRef> in, std::vector<int32_t>* lengths,
                std::vector<uint8_t>* step_mask) {
  lengths->clear();
  step_mask->clear();
  for (const MaskRef& v : in) {
    if (v.lengths->empty()) continue;
    if (lengths->empty()) {
      *lengths = *v.lengths;
    } else {
      for (size_t b = 0; b < lengths->size(); ++b) {
        (*lengths)[b] = std::min((*lengths)[b], (*v.lengths)[b]);
      }
    }
  }
  // Interior step masks, ANDed and cut at the merged lengths.
  const MaskRef* first_steps = nullptr;
  for (const MaskRef& v : in) {
    if (!v.step_mask->empty()) first_steps = &v;
  }
  if (first_steps == nullptr) return;
  const int64_t B = lengths->size();
  const int64_t T = static_cast<int64_t>(first_steps->step_mask->size()) / std::max<int64_t>(B, 1);
  std::vector<uint8_t> valid(B * T, 0);  // [B, T]
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < (*lengths)[b]; ++t) {
      uint8_t ok = 1;
      for (const MaskRef& v : in) {
        if (!v.step_mask->empty()) ok &= (*v.step_mask)[b * T + t];
      }
      valid[b * T + t] = ok;
    }
  }
  MaskFromSteps(valid, B, T, lengths, step_mask);
}

}  // namespace rnnserve::engine::plan
