#include "engine/cpu/recurrent.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cpu/panel_gemm.h"
#include "engine/cpu/recurrent_internal.h"
#include "engine/cpu/stop_check.h"
#include "engine/cpu/work_team.h"
#include "engine/lengths.h"

namespace rnnserve::engine::cpu {
namespace {

// Splits n units into `parts` slices; slices are multiples of 16 (one AVX-512 register of
// floats) when n allows it.
std::vector<int> Split(int n, int parts) {
  std::vector<int> begin(parts + 1, 0);
  const int grain = n >= 16 * parts ? 16 : 1;
  const int chunks = (n + grain - 1) / grain;
  for (int p = 0; p <= parts; ++p) {
    begin[p] = std::min(n, static_cast<int>((static_cast<int64_t>(chunks) * p / parts)) * grain);
  }
  begin[parts] = n;
  return begin;
}

template <typename T, typename A>
void Grow(std::vector<T, A>* v, size_t n) {
  if (v->size() < n) v->resize(n);
}

}  // namespace

RecurrentKernel::RecurrentKernel(const RecurrentSpec& spec, std::string name, int num_threads,
                                 CpuWeights weights, RecurrentSplit split)
    : spec_(spec),
      name_(std::move(name)),
      num_threads_(std::max(1, num_threads)),
      weights_(weights),
      split_(split),
      row_split_(split != RecurrentSplit::kUnits && spec.hidden_size <= kMaxRowSplitUnits &&
                 spec.output_size() <= kMaxRowSplitUnits),
      scratch_(std::make_unique<Scratch>()),
      team_(std::make_unique<WorkTeam>(num_threads_)) {}

RecurrentKernel::~RecurrentKernel() = default;

absl::StatusOr<std::unique_ptr<RecurrentKernel>> RecurrentKernel::Create(
    const RecurrentSpec& spec, const std::string& name, const RecurrentOptions& options) {
  if (auto s = spec.Validate(name); !s.ok()) return s;
  if (spec.proj_size > 0 && spec.cell != CellType::kLstm) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer '", name, "': projection is only defined for LSTM, not ", CellTypeName(spec.cell)));
  }
  if (spec.merge == MergeMode::kNone && spec.directions.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer '", name, "': merge mode none needs two directions, got ", spec.directions.size()));
  }
  if (spec.clip < 0.0f) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", name, "': clip must be >= 0 (0: none); was ", spec.clip));
  }
  if (spec.input_forget && spec.cell != CellType::kLstm) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", name, "': input_forget is only defined for LSTM"));
  }
  for (const RecurrentDirection& d : spec.directions) {
    if (!d.peephole.empty() && spec.cell != CellType::kLstm) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer '", name, "': peepholes are only defined for LSTM"));
    }
    for (const Activation* a : {&d.f, &d.g, &d.h}) {
      if (a->kind == ActivationKind::kSoftmax) {
        return absl::InvalidArgumentError(
            absl::StrCat("layer '", name, "': softmax cannot be a recurrent cell activation"));
      }
    }
  }
  const int threads = std::min(std::max(1, options.num_threads), spec.hidden_size);
  std::unique_ptr<RecurrentKernel> k(
      new RecurrentKernel(spec, name, threads, options.weights, options.split));
  k->Pack();
  k->Reserve(
      std::max(1, options.max_batch_size),
      static_cast<int64_t>(std::max(1, options.max_batch_size)) * std::max(0, options.max_steps));
  return k;
}

namespace {

// The weights of units [u0, u0 + nu) (projected units [p0, p0 + np)) of one direction, in the
// precision `mode`.
RecurrentKernel::Packed::Slice PackSlice(const RecurrentSpec& spec_, CpuWeights mode,
                                         const RecurrentDirection& dir, int u0, int nu, int p0,
                                         int np) {
  using Packed = RecurrentKernel::Packed;
  const int H = spec_.hidden_size, Hp = spec_.output_size(), G = spec_.gates();
  const int I = spec_.input_size;
  const bool gru = spec_.cell == CellType::kGru;
  Packed::Slice sl;
  // The slice's rows of W and R, gate-major: row q*nu + j is gate q of unit u0 + j.
  std::vector<float> w(static_cast<size_t>(G) * nu * I), r(static_cast<size_t>(G) * nu * Hp);
  sl.bias.resize(static_cast<size_t>(G) * nu);
  for (int q = 0; q < G; ++q) {
    for (int j = 0; j < nu; ++j) {
      const size_t src = static_cast<size_t>(q) * H + u0 + j, dst = size_t(q) * nu + j;
      std::copy_n(dir.W.data() + src * I, I, w.data() + dst * I);
      std::copy_n(dir.R.data() + src * Hp, Hp, r.data() + dst * Hp);
      const bool keep_rn = gru && spec_.reset_after && q == 2;
      sl.bias[dst] = dir.bW[src] + (keep_rn ? 0.0f : dir.bR[src]);
    }
  }
  if (gru && spec_.reset_after) {
    sl.bRn.assign(dir.bR.begin() + 2 * H + u0, dir.bR.begin() + 2 * H + u0 + nu);
  }
  sl.W = PackedWeights::Pack(w.data(), I, G * nu, I, mode);
  if (gru && !spec_.reset_after) {
    sl.R = PackedWeights::Pack(r.data(), Hp, 2 * nu, Hp, mode);
    sl.Rn = PackedWeights::Pack(r.data() + static_cast<size_t>(2) * nu * Hp, Hp, nu, Hp, mode);
  } else {
    sl.R = PackedWeights::Pack(r.data(), Hp, G * nu, Hp, mode);
  }
  if (spec_.proj_size > 0) {
    sl.P = PackedWeights::Pack(dir.P.data() + static_cast<size_t>(p0) * H, H, np, H, mode);
  }
  return sl;
}

}  // namespace

void RecurrentKernel::Pack() {
  const int H = spec_.hidden_size, Hp = spec_.output_size();
  unit_begin_ = Split(H, num_threads_);
  proj_begin_ = Split(Hp, num_threads_);
  packed_.resize(spec_.directions.size());
  for (size_t d = 0; d < spec_.directions.size(); ++d) {
    const RecurrentDirection& dir = spec_.directions[d];
    Packed& p = packed_[d];
    p.slices.resize(num_threads_);
    for (int t = 0; t < num_threads_; ++t) {
      const int u0 = unit_begin_[t], p0 = proj_begin_[t];
      p.slices[t] =
          PackSlice(spec_, weights_, dir, u0, unit_begin_[t + 1] - u0, p0, proj_begin_[t + 1] - p0);
    }
    // The row-split path: every unit in one slice (one thread alone would have this already).
    if (row_split_ && num_threads_ > 1) {
      p.whole = std::make_unique<Packed::Slice>(PackSlice(spec_, weights_, dir, 0, H, 0, Hp));
    }
  }
}

void RecurrentKernel::Reserve(int64_t batch, int64_t rows) {
  const int H = spec_.hidden_size, Hp = spec_.output_size(), G = spec_.gates();
  Scratch& s = *scratch_;
  Grow(&s.xpack, rows * spec_.input_size);
  Grow(&s.h[0], batch * Hp);
  Grow(&s.h[1], batch * Hp);
  if (spec_.cell == CellType::kLstm) Grow(&s.c, batch * H);
  if (spec_.proj_size > 0 || (spec_.cell == CellType::kGru && !spec_.reset_after)) {
    Grow(&s.shared, batch * H);
  }
  s.gates.resize(num_threads_);
  s.xproj.resize(num_threads_);
  s.gemm.resize(num_threads_);
  for (int t = 0; t < num_threads_; ++t) {
    const int nu = unit_begin_[t + 1] - unit_begin_[t];
    Grow(&s.gates[t], batch * G * nu);
    Grow(&s.xproj[t], rows * G * nu);
  }
  Grow(&s.order, batch);
  Grow(&s.len, batch);
  Grow(&s.offset, batch);
}

bool RecurrentKernel::UsesRowSplit(int64_t batch) const {
  if (!row_split_) return false;
  if (split_ == RecurrentSplit::kRows || num_threads_ == 1) return true;
  // Fewer rows than threads: the unit split only where a step is worth a barrier even on a
  // busy machine, whose descheduled threads stall every step of it (an H=128 LSTM at B=1 ran
  // 0.18 ms on one thread and 16 ms on two at a load of 3 per core); the row split then runs
  // on as many threads as there are rows.
  const int64_t step_work =
      batch * spec_.gates() * static_cast<int64_t>(spec_.hidden_size) * spec_.output_size();
  return batch >= num_threads_ || step_work < kMinUnitSplitStepWork;
}

std::string RecurrentKernel::split_description() const {
  const std::string units = absl::StrCat("unit split (", num_threads_,
                                         " threads share each step's units, a barrier per step)");
  if (!row_split_) return units;
  const std::string rows =
      absl::StrCat("row split (H <= ", kMaxRowSplitUnits,
                   ": each thread runs whole fused steps for its rows, no barrier per step)");
  // The unit split runs below the first batch size from which on every batch takes rows.
  int64_t rows_from = 1;
  for (int64_t b = 1; b < num_threads_; ++b) {
    if (!UsesRowSplit(b)) rows_from = b + 1;
  }
  if (rows_from == 1) return rows;
  return absl::StrCat(rows, " at batches of ", rows_from, " rows or more; ", units, " below");
}

int RecurrentKernel::num_sequence_outputs() const {
  return spec_.merge == MergeMode::kNone && spec_.directions.size() == 2 ? 2 : 1;
}

int RecurrentKernel::num_outputs() const {
  const int dirs = static_cast<int>(spec_.directions.size());
  int n = num_sequence_outputs();
  if (spec_.return_state) n += dirs * (spec_.cell == CellType::kLstm ? 2 : 1);
  return n;
}

int64_t RecurrentKernel::memory_bytes() const {
  int64_t floats = 0, bytes = 0;
  for (const RecurrentDirection& d : spec_.directions) {
    floats += d.peephole.size();  // read from the spec; every other weight is packed
  }
  for (const Packed& p : packed_) {
    std::vector<const Packed::Slice*> slices;
    for (const Packed::Slice& sl : p.slices) slices.push_back(&sl);
    if (p.whole) slices.push_back(p.whole.get());
    for (const Packed::Slice* sl : slices) {
      bytes += sl->W.bytes() + sl->R.bytes() + sl->Rn.bytes() + sl->P.bytes();
      floats += sl->bias.size() + sl->bRn.size();
    }
  }
  const Scratch& s = *scratch_;
  floats += s.xpack.capacity() + s.h[0].capacity() + s.h[1].capacity() + s.c.capacity() +
            s.shared.capacity();
  for (const auto& g : s.gates) floats += g.capacity();
  for (const auto& g : s.row_gates) floats += g.capacity();
  floats += s.xproj_all.capacity();
  for (const auto& x : s.xproj) floats += x.capacity();
  for (const GemmScratch& g : s.gemm) {
    bytes += g.a.capacity() + g.a_scale.capacity() * sizeof(float) +
             g.a_zero.capacity() * sizeof(int32_t);
  }
  return bytes + static_cast<int64_t>(sizeof(float)) * floats +
         static_cast<int64_t>(
             s.order.capacity() * sizeof(int) + s.len.capacity() * sizeof(int32_t) +
             s.offset.capacity() * sizeof(int64_t) + s.active.capacity() * sizeof(int) +
             s.first_valid.capacity() * sizeof(int64_t));
}

namespace {

// A bidirectional layer's output under merge mode concat, sum, mul or ave: a and b [..., H']
// (forward, backward) -> [..., H'] ([..., 2H'] for concat).
Tensor MergeDirections(MergeMode merge, const Tensor& a, const Tensor& b, int Hp) {
  const int64_t rows = a.num_elements() / Hp;
  Shape shape = a.shape();
  if (merge == MergeMode::kConcat) shape.back() = 2 * Hp;
  Tensor out = Tensor::Float(shape);
  float* o = out.f32();
  for (int64_t r = 0; r < rows; ++r) {
    const float* pa = a.f32() + r * Hp;
    const float* pb = b.f32() + r * Hp;
    switch (merge) {
      case MergeMode::kConcat:
        std::copy_n(pa, Hp, o + r * 2 * Hp);
        std::copy_n(pb, Hp, o + r * 2 * Hp + Hp);
        break;
      case MergeMode::kSum:
        for (int j = 0; j < Hp; ++j) o[r * Hp + j] = pa[j] + pb[j];
        break;
      case MergeMode::kMul:
        for (int j = 0; j < Hp; ++j) o[r * Hp + j] = pa[j] * pb[j];
        break;
      case MergeMode::kAve:
        for (int j = 0; j < Hp; ++j) o[r * Hp + j] = (pa[j] + pb[j]) / 2.0f;
        break;
      case MergeMode::kNone:
        break;
    }
  }
  return out;
}

}  // namespace

absl::Status RecurrentKernel::Run(const Tensor& x, absl::Span<const int32_t> lengths,
                                  absl::Span<const uint8_t> step_mask,
                                  absl::Span<const Tensor> initial_states,
                                  std::vector<Tensor>* outputs, std::vector<Tensor>* final_states,
                                  bool continues, StopCheck* stop) {
  if (x.dtype() != DType::kFloat32 || x.rank() != 3 || x.dim(2) != spec_.input_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", name_, "': input ", DTypeName(x.dtype()), " ",
                     ShapeString(x.shape()), " expected FP32 [B,T,", spec_.input_size, "]"));
  }
  const int64_t B = x.dim(0), T = x.dim(1);
  if (static_cast<int64_t>(lengths.size()) != B) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", name_, "': ", lengths.size(), " lengths for a batch of ", B));
  }
  if (auto st = CheckLengths(lengths, B, T, absl::StrCat("layer '", name_, "': lengths"));
      !st.ok()) {
    return st;
  }
  if (!step_mask.empty() && static_cast<int64_t>(step_mask.size()) != B * T) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", name_, "': step mask has ",
                                                   step_mask.size(), " entries, expected ", B * T));
  }
  const bool lstm = spec_.cell == CellType::kLstm;
  const int dirs = static_cast<int>(spec_.directions.size());
  const int per_dir_states = lstm ? 2 : 1;
  const int H = spec_.hidden_size, Hp = spec_.output_size();
  if (!initial_states.empty()) {
    if (static_cast<int>(initial_states.size()) != dirs * per_dir_states) {
      return absl::InvalidArgumentError(absl::StrCat("layer '", name_, "': expected ",
                                                     dirs * per_dir_states, " initial states, got ",
                                                     initial_states.size()));
    }
    for (int i = 0; i < static_cast<int>(initial_states.size()); ++i) {
      const int64_t want = (i % per_dir_states == 0) ? Hp : H;
      const Tensor& s = initial_states[i];
      if (s.dtype() != DType::kFloat32 || s.rank() != 2 || s.dim(0) != B || s.dim(1) != want) {
        return absl::InvalidArgumentError(
            absl::StrCat("layer '", name_, "': initial state ", i, " is ", DTypeName(s.dtype()),
                         " ", ShapeString(s.shape()), ", expected FP32 [", B, ",", want, "]"));
      }
    }
  }

  const bool seq = spec_.return_sequences;
  std::vector<Tensor> dir_seq, h_fin, c_fin;
  for (int d = 0; d < dirs; ++d) {
    dir_seq.push_back(seq ? Tensor::Float({B, T, Hp}) : Tensor());
    h_fin.push_back(Tensor::Float({B, Hp}));
    c_fin.push_back(lstm ? Tensor::Float({B, H}) : Tensor());
    const float* h0 = initial_states.empty() ? nullptr : initial_states[d * per_dir_states].f32();
    const float* c0 =
        (initial_states.empty() || !lstm) ? nullptr : initial_states[d * per_dir_states + 1].f32();
    RunDirection(d, x, lengths, step_mask.empty() ? nullptr : step_mask.data(), h0, c0,
                 seq ? dir_seq[d].f32() : nullptr, h_fin[d].f32(), lstm ? c_fin[d].f32() : nullptr,
                 continues, stop);
    if (stop != nullptr && stop->stopped()) {
      return absl::CancelledError(
          absl::StrCat("layer '", name_, "': the run was stopped (Batch::stop)"));
    }
  }

  // The layer's main output: per direction the sequence or the final h, then merged.
  std::vector<Tensor> main;
  for (int d = 0; d < dirs; ++d) main.push_back(seq ? std::move(dir_seq[d]) : h_fin[d]);
  outputs->clear();
  if (dirs == 1) {
    outputs->push_back(std::move(main[0]));
  } else if (spec_.merge == MergeMode::kNone) {
    outputs->push_back(std::move(main[0]));
    outputs->push_back(std::move(main[1]));
  } else {
    outputs->push_back(MergeDirections(spec_.merge, main[0], main[1], Hp));
  }
  std::vector<Tensor> states;
  for (int d = 0; d < dirs; ++d) {
    states.push_back(std::move(h_fin[d]));
    if (lstm) states.push_back(std::move(c_fin[d]));
  }
  if (spec_.return_state) {
    for (const Tensor& s : states) outputs->push_back(s);
  }
  if (final_states) *final_states = std::move(states);
  return absl::OkStatus();
}

}  // namespace rnnserve::engine::cpu
