// Plans of MatMul, Gemm and the reductions.

#include "engine/plan/tensor_op_plans.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rnnserve::engine::plan {

absl::StatusOr<MatMulPlan> PlanMatMul(TensorOpKind kind, const Shape& a, const Shape& b) {
  if (a.empty() || b.empty()) return Bad(kind, "operands must have rank >= 1");
  MatMulPlan plan;
  Shape as = a, bs = b;
  plan.a_vector = as.size() == 1;
  plan.b_vector = bs.size() == 1;
  if (plan.a_vector) as.insert(as.begin(), 1);
  if (plan.b_vector) bs.push_back(1);
  plan.M = as[as.size() - 2];
  plan.K = as.back();
  plan.N = bs.back();
  if (bs[bs.size() - 2] != plan.K) {
    return Bad(kind,
               absl::StrCat("inner dimensions differ: ", ShapeString(a), " x ", ShapeString(b)));
  }
  plan.abatch.assign(as.begin(), as.end() - 2);
  plan.bbatch.assign(bs.begin(), bs.end() - 2);
  auto batch = Broadcast(kind, plan.abatch, plan.bbatch);
  if (!batch.ok()) return batch.status();
  plan.batch = std::move(*batch);
  Shape full = plan.batch;
  full.push_back(plan.M);
  full.push_back(plan.N);
  if (auto n = CheckedCount(kind, full); !n.ok()) return n.status();
  plan.out = plan.batch;
  if (!plan.a_vector) plan.out.push_back(plan.M);
  if (!plan.b_vector) plan.out.push_back(plan.N);
  return plan;
}

absl::StatusOr<GemmPlan> PlanGemm(const TensorOpSpec& spec, const Shape& a, const Shape& b,
                                  const Shape* c) {
  if (a.size() != 2 || b.size() != 2) {
    return Bad(spec.kind,
               absl::StrCat("expects 2-D A and B, got ", ShapeString(a), " and ", ShapeString(b)));
  }
  GemmPlan plan;
  plan.M = spec.trans_a ? a[1] : a[0];
  plan.K = spec.trans_a ? a[0] : a[1];
  plan.N = spec.trans_b ? b[0] : b[1];
  if ((spec.trans_b ? b[1] : b[0]) != plan.K) {
    return Bad(spec.kind,
               absl::StrCat("inner dimensions differ: ", ShapeString(a), " x ", ShapeString(b)));
  }
  const Shape mn = {plan.M, plan.N};
  if (c != nullptr) {
    auto bc = Broadcast(spec.kind, mn, *c);
    if (!bc.ok() || *bc != mn) {
      return Bad(spec.kind,
                 absl::StrCat("C ", ShapeString(*c), " does not broadcast to ", ShapeString(mn)));
    }
  }
  return plan;
}

absl::StatusOr<ReducePlan> PlanReduce(const TensorOpSpec& spec, const Shape& x) {
  const int rank = static_cast<int>(x.size());
  ReducePlan plan;
  plan.reduced.assign(rank, spec.ints.empty());
  for (int64_t a : spec.ints) {
    auto axis = Axis(spec.kind, a, rank);
    if (!axis.ok()) return axis.status();
    plan.reduced[*axis] = true;
  }
  for (int i = 0; i < rank; ++i) {
    if (plan.reduced[i]) plan.count *= x[i];
    if (!plan.reduced[i] || spec.keep_dims) plan.out.push_back(plan.reduced[i] ? 1 : x[i]);
  }
  if (spec.kind == TensorOpKind::kReduceMax && plan.count == 0) {
    return Bad(spec.kind, "reducing an empty axis");
  }
  return plan;
}

}  // namespace rnnserve::engine::plan
