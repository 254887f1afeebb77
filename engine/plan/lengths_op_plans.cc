#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/lengths.h"
#include "engine/plan/tensor_op_plans.h"

namespace rnnserve::engine::plan {

absl::StatusOr<LengthsOpPlan> PlanLengthsOp(const TensorOpSpec& spec, const Shape& x,
                                            absl::Span<const int32_t> lengths) {
  const int rank = static_cast<int>(x.size());
  if (spec.ints.size() != 1) return Bad(spec.kind, "needs its batch axis in ints");
  auto time = Axis(spec.kind, spec.axis, rank);
  if (!time.ok()) return time.status();
  auto batch = Axis(spec.kind, spec.ints[0], rank);
  if (!batch.ok()) return batch.status();
  if (*time == *batch) return Bad(spec.kind, "batch and time axes are the same");
  LengthsOpPlan p;
  p.B = x[*batch];
  p.T = x[*time];
  p.time_first = *time < *batch;
  const int first = std::min(*time, *batch), second = std::max(*time, *batch);
  for (int i = 0; i < rank; ++i) {
    if (i < first) p.outer *= x[i];
    if (i > first && i < second) p.mid *= x[i];
    if (i > second) p.inner *= x[i];
  }
  if (auto st = CheckLengths(lengths, p.B, p.T, TensorOpName(spec.kind) + ": lengths"); !st.ok()) {
    return st;
  }
  p.lengths.assign(lengths.begin(), lengths.end());
  if (p.lengths.empty()) p.lengths.assign(p.B, static_cast<int32_t>(p.T));
  p.out = x;
  if (spec.kind == TensorOpKind::kGatherAtLengths) {
    if (p.T == 0) return Bad(spec.kind, "the time axis is empty");
    if (spec.keep_dims) {
      p.out[*time] = 1;
    } else {
      p.out.erase(p.out.begin() + *time);
    }
  }
  return p;
}

}  // namespace rnnserve::engine::plan
