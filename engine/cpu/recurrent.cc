#include "engine/cpu/recurrent.h"

#include <Eigen/Core>
#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cpu/activation.h"

namespace rnnserve::engine::cpu {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapRow = Eigen::Map<RowMat>;
using CMapRow = Eigen::Map<const RowMat>;

template <typename T>
void Grow(std::vector<T>* v, size_t n) {
  if (v->size() < n) v->resize(n);
}

inline float Clip(float x, float clip) {
  return clip > 0.0f ? std::clamp(x, -clip, clip) : x;
}

}  // namespace

RecurrentKernel::RecurrentKernel(const RecurrentSpec& spec, std::string name)
    : spec_(spec), name_(std::move(name)) {}

absl::StatusOr<std::unique_ptr<RecurrentKernel>> RecurrentKernel::Create(
    const RecurrentSpec& spec, const std::string& name) {
  if (auto s = spec.Validate(name); !s.ok()) return s;
  if (spec.proj_size > 0 && spec.cell != CellType::kLstm) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", name, "': projection is only defined for LSTM"));
  }
  if (spec.merge == MergeMode::kNone && spec.directions.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", name, "': merge mode none needs two directions"));
  }
  return std::unique_ptr<RecurrentKernel>(new RecurrentKernel(spec, name));
}

int RecurrentKernel::num_outputs() const {
  const int dirs = static_cast<int>(spec_.directions.size());
  int n = spec_.merge == MergeMode::kNone && dirs == 2 ? 2 : 1;
  if (spec_.return_state) n += dirs * (spec_.cell == CellType::kLstm ? 2 : 1);
  return n;
}

int64_t RecurrentKernel::memory_bytes() const {
  int64_t weights = 0;
  for (const RecurrentDirection& d : spec_.directions) {
    weights += d.W.size() + d.R.size() + d.bW.size() + d.bR.size() + d.P.size() + d.peephole.size();
  }
  const int64_t scratch = xproj_.capacity() + gates_.capacity() + h_.capacity() + c_.capacity() +
                          hraw_.capacity() + rh_.capacity() + seq_.capacity();
  return static_cast<int64_t>(sizeof(float)) * (weights + scratch);
}

void RecurrentKernel::RunDirection(int d, const Tensor& x, absl::Span<const int32_t> lengths,
                                   const float* h0, const float* c0, float* seq_out,
                                   float* h_out, float* c_out) {
  const RecurrentDirection& dir = spec_.directions[d];
  const bool lstm = spec_.cell == CellType::kLstm;
  const bool gru = spec_.cell == CellType::kGru;
  const int64_t B = x.dim(0), T = x.dim(1), I = x.dim(2);
  const int H = spec_.hidden_size;
  const int Hp = spec_.output_size();
  const int GH = spec_.gates() * H;

  // Sequences sorted by length, longest first: the ones still running at step s are a prefix.
  std::vector<int> order(B);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return lengths[a] > lengths[b]; });

  // Biases folded into the projection: bW + bR, except GRU reset_after's n gate, whose bR
  // sits inside r * (R h + bR_n).
  std::vector<float> bias(GH);
  for (int j = 0; j < GH; ++j) {
    const bool keep_rn = gru && spec_.reset_after && j >= 2 * H;
    bias[j] = dir.bW[j] + (keep_rn ? 0.0f : dir.bR[j]);
  }

  // [B*T, GH] projection of the valid steps only: each sequence's valid prefix is contiguous.
  Grow(&xproj_, static_cast<size_t>(B * T * GH));
  CMapRow W(dir.W.data(), GH, I);                 // [GH, I]
  CMapRow R(dir.R.data(), GH, Hp);                // [GH, H']
  Eigen::Map<const Eigen::RowVectorXf> bias_row(bias.data(), GH);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = lengths[b];
    if (len == 0) continue;
    CMapRow xb(x.f32() + b * T * I, len, I);      // [len, I]
    MapRow pb(xproj_.data() + b * T * GH, len, GH);  // [len, GH]
    pb.noalias() = xb * W.transpose();
    pb.rowwise() += bias_row;
  }

  Grow(&gates_, static_cast<size_t>(B * GH));
  Grow(&h_, static_cast<size_t>(B * Hp));
  Grow(&c_, static_cast<size_t>(B * H));
  Grow(&hraw_, static_cast<size_t>(B * H));
  Grow(&rh_, static_cast<size_t>(B * GH));
  for (int64_t k = 0; k < B; ++k) {
    const int b = order[k];
    for (int j = 0; j < Hp; ++j) h_[k * Hp + j] = h0 ? h0[b * Hp + j] : 0.0f;
    if (lstm) {
      for (int j = 0; j < H; ++j) c_[k * H + j] = c0 ? c0[b * H + j] : 0.0f;
    }
  }

  const int64_t max_len = B > 0 ? lengths[order[0]] : 0;
  const float clip = spec_.clip;
  const float* peep = dir.peephole.empty() ? nullptr : dir.peephole.data();
  int64_t n = B;
  for (int64_t s = 0; s < max_len; ++s) {
    while (n > 0 && lengths[order[n - 1]] <= s) --n;
    // Gather this step's projected inputs.
    for (int64_t k = 0; k < n; ++k) {
      const int b = order[k];
      const int64_t t = dir.reverse ? lengths[b] - 1 - s : s;
      std::copy_n(xproj_.data() + (b * T + t) * GH, GH, gates_.data() + k * GH);
    }
    MapRow G(gates_.data(), n, GH);     // [n, GH]
    MapRow Hs(h_.data(), n, Hp);        // [n, H']
    if (gru) {
      if (spec_.reset_after) {
        MapRow Rec(rh_.data(), n, GH);  // [n, GH] recurrent part, with bR
        Rec.noalias() = Hs * R.transpose();
        Eigen::Map<const Eigen::RowVectorXf> br(dir.bR.data(), GH);
        Rec.rowwise() += br;
        for (int64_t k = 0; k < n; ++k) {
          float* g = gates_.data() + k * GH;
          const float* rec = rh_.data() + k * GH;
          float* h = h_.data() + k * Hp;
          for (int j = 0; j < H; ++j) {
            const float r = Activate(dir.f, Clip(g[j] + rec[j], clip));
            const float z = Activate(dir.f, Clip(g[H + j] + rec[H + j], clip));
            const float nn = Activate(dir.g, Clip(g[2 * H + j] + r * rec[2 * H + j], clip));
            h[j] = (1.0f - z) * nn + z * h[j];
          }
        }
      } else {
        G.leftCols(2 * H).noalias() += Hs * R.topRows(2 * H).transpose();
        MapRow RH(rh_.data(), n, H);  // [n, H] r * h
        for (int64_t k = 0; k < n; ++k) {
          float* g = gates_.data() + k * GH;
          const float* h = h_.data() + k * Hp;
          for (int j = 0; j < H; ++j) {
            g[j] = Activate(dir.f, Clip(g[j], clip));                  // r
            g[H + j] = Activate(dir.f, Clip(g[H + j], clip));          // z
            rh_[k * H + j] = g[j] * h[j];
          }
        }
        G.rightCols(H).noalias() += RH * R.bottomRows(H).transpose();
        for (int64_t k = 0; k < n; ++k) {
          const float* g = gates_.data() + k * GH;
          float* h = h_.data() + k * Hp;
          for (int j = 0; j < H; ++j) {
            const float z = g[H + j];
            const float nn = Activate(dir.g, Clip(g[2 * H + j], clip));
            h[j] = (1.0f - z) * nn + z * h[j];
          }
        }
      }
    } else {
      G.noalias() += Hs * R.transpose();
      if (lstm) {
        for (int64_t k = 0; k < n; ++k) {
          float* g = gates_.data() + k * GH;
          float* c = c_.data() + k * H;
          float* hr = hraw_.data() + k * H;
          for (int j = 0; j < H; ++j) {
            float zi = g[j], zf = g[H + j], zc = g[2 * H + j], zo = g[3 * H + j];
            if (peep) {
              zi += peep[j] * c[j];
              zf += peep[H + j] * c[j];
            }
            const float i = Activate(dir.f, Clip(zi, clip));
            const float f = spec_.input_forget ? 1.0f - i : Activate(dir.f, Clip(zf, clip));
            const float cand = Activate(dir.g, Clip(zc, clip));
            c[j] = f * c[j] + i * cand;
            if (peep) zo += peep[2 * H + j] * c[j];
            const float o = Activate(dir.f, Clip(zo, clip));
            hr[j] = o * Activate(dir.h, c[j]);
          }
        }
        if (spec_.proj_size > 0) {
          CMapRow P(dir.P.data(), Hp, H);  // [proj, H]
          Hs.noalias() = MapRow(hraw_.data(), n, H) * P.transpose();
        } else {
          std::copy_n(hraw_.data(), n * H, h_.data());
        }
      } else {
        for (int64_t k = 0; k < n; ++k) {
          const float* g = gates_.data() + k * GH;
          float* h = h_.data() + k * Hp;
          for (int j = 0; j < H; ++j) h[j] = Activate(dir.f, Clip(g[j], clip));
        }
      }
    }
    if (seq_out) {
      for (int64_t k = 0; k < n; ++k) {
        const int b = order[k];
        const int64_t len = lengths[b];
        const int64_t pos = dir.outputs_in_processing_order ? (T - len) + s
                            : dir.reverse                  ? len - 1 - s
                                                           : s;
        std::copy_n(h_.data() + k * Hp, Hp, seq_out + (b * T + pos) * Hp);
      }
    }
  }

  // Final states, in the caller's order.
  for (int64_t k = 0; k < B; ++k) {
    const int b = order[k];
    std::copy_n(h_.data() + k * Hp, Hp, h_out + b * Hp);
    if (lstm && c_out) std::copy_n(c_.data() + k * H, H, c_out + b * H);
  }

  // Positions no valid step wrote. Only a forward Keras layer has positions after its last
  // step; Keras repeats the last output there. Every other unwritten position precedes the
  // first processed step (or is ONNX padding) and is zero.
  if (seq_out) {
    const bool repeat = spec_.masking == MaskSemantics::kKeras && !spec_.zero_output_for_mask &&
                        !dir.reverse;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = lengths[b];
      if (len == T) continue;
      int64_t from = len, to = T;
      if (dir.outputs_in_processing_order) from = 0, to = T - len;
      for (int64_t p = from; p < to; ++p) {
        float* dst = seq_out + (b * T + p) * Hp;
        if (repeat && len > 0) {
          std::copy_n(h_out + b * Hp, Hp, dst);
        } else {
          std::fill_n(dst, Hp, 0.0f);
        }
      }
    }
  }
}

absl::Status RecurrentKernel::Run(const Tensor& x, absl::Span<const int32_t> lengths,
                                  absl::Span<const Tensor> initial_states,
                                  std::vector<Tensor>* outputs) {
  if (x.rank() != 3 || x.dim(2) != spec_.input_size || x.dtype() != DType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", name_, "': input ",
                                                   ShapeString(x.shape()), " expected [B,T,",
                                                   spec_.input_size, "]"));
  }
  const int64_t B = x.dim(0), T = x.dim(1);
  if (static_cast<int64_t>(lengths.size()) != B) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", name_, "': ", lengths.size(),
                                                   " lengths for a batch of ", B));
  }
  for (int32_t len : lengths) {
    if (len < 0 || len > T) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer '", name_, "': length ", len, " outside [0, ", T, "]"));
    }
  }
  const bool lstm = spec_.cell == CellType::kLstm;
  const int dirs = static_cast<int>(spec_.directions.size());
  const int per_dir_states = lstm ? 2 : 1;
  const int H = spec_.hidden_size, Hp = spec_.output_size();
  if (!initial_states.empty()) {
    if (static_cast<int>(initial_states.size()) != dirs * per_dir_states) {
      return absl::InvalidArgumentError(absl::StrCat("layer '", name_, "': expected ",
                                                     dirs * per_dir_states,
                                                     " initial states, got ",
                                                     initial_states.size()));
    }
    for (int i = 0; i < static_cast<int>(initial_states.size()); ++i) {
      const int64_t want = (i % per_dir_states == 0) ? Hp : H;
      const Tensor& s = initial_states[i];
      if (s.rank() != 2 || s.dim(0) != B || s.dim(1) != want) {
        return absl::InvalidArgumentError(absl::StrCat("layer '", name_, "': initial state ", i,
                                                       " is ", ShapeString(s.shape()),
                                                       ", expected [", B, ",", want, "]"));
      }
    }
  }

  const bool seq = spec_.return_sequences;
  Grow(&seq_, static_cast<size_t>(seq ? B * T * Hp : 0));
  std::vector<Tensor> dir_seq, h_fin, c_fin;
  for (int d = 0; d < dirs; ++d) {
    dir_seq.push_back(seq ? Tensor::Float({B, T, Hp}) : Tensor());
    h_fin.push_back(Tensor::Float({B, Hp}));
    c_fin.push_back(lstm ? Tensor::Float({B, H}) : Tensor());
    const float* h0 = initial_states.empty() ? nullptr
                                             : initial_states[d * per_dir_states].f32();
    const float* c0 = (initial_states.empty() || !lstm)
                          ? nullptr
                          : initial_states[d * per_dir_states + 1].f32();
    RunDirection(d, x, lengths, h0, c0, seq ? dir_seq[d].f32() : nullptr, h_fin[d].f32(),
                 lstm ? c_fin[d].f32() : nullptr);
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
    const Tensor& a = main[0];
    const Tensor& b = main[1];
    const int64_t rows = a.num_elements() / Hp;
    Shape shape = a.shape();
    if (spec_.merge == MergeMode::kConcat) shape.back() = 2 * Hp;
    Tensor out = Tensor::Float(shape);
    float* o = out.f32();
    for (int64_t r = 0; r < rows; ++r) {
      const float* pa = a.f32() + r * Hp;
      const float* pb = b.f32() + r * Hp;
      switch (spec_.merge) {
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
          for (int j = 0; j < Hp; ++j) o[r * Hp + j] = 0.5f * (pa[j] + pb[j]);
          break;
        case MergeMode::kNone:
          break;
      }
    }
    outputs->push_back(std::move(out));
  }
  if (spec_.return_state) {
    for (int d = 0; d < dirs; ++d) {
      outputs->push_back(std::move(h_fin[d]));
      if (lstm) outputs->push_back(std::move(c_fin[d]));
    }
  }
  return absl::OkStatus();
}

}  // namespace rnnserve::engine::cpu
