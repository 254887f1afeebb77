#include "models/keras/keras_recurrent.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rnnserve::models::keras {
namespace {

using engine::Activation;
using engine::ActivationKind;
using engine::CellType;

// Canonical gate g comes from Keras block kOrder[g].
const std::vector<int>& GateOrder(CellType cell) {
  static const std::vector<int> kLstm = {0, 1, 2, 3};  // i, f, c, o -> i, f, g, o
  static const std::vector<int> kGru = {1, 0, 2};      // z, r, h -> r, z, n
  static const std::vector<int> kRnn = {0};
  return cell == CellType::kLstm ? kLstm : cell == CellType::kGru ? kGru : kRnn;
}

// Keras kernel [rows, G*H] -> canonical [G*H, rows] (transposed per gate, gates reordered).
std::vector<float> FromKeras(const Array& k, int G, int H, const std::vector<int>& order) {
  const int64_t rows = k.shape[0];
  const int64_t cols = int64_t{G} * H;
  std::vector<float> out(cols * rows);  // [G*H, rows]
  for (int g = 0; g < G; ++g) {
    for (int j = 0; j < H; ++j) {
      const int64_t src_col = int64_t{order[g]} * H + j;
      float* dst = out.data() + (int64_t{g} * H + j) * rows;
      for (int64_t i = 0; i < rows; ++i) dst[i] = k.data[i * cols + src_col];
    }
  }
  return out;
}

// CuDNN input kernel [I, G*H]: gate block g, read row-major, is cuDNN's W_g [H, I] as is
// (Keras: kernel.T.reshape(kernel.shape, order='F') per gate).
std::vector<float> FromCudnnInput(const Array& k, int G, int H, const std::vector<int>& order) {
  const int64_t I = k.shape[0];
  const int64_t cols = int64_t{G} * H;
  std::vector<float> out(cols * I);  // [G*H, I]
  for (int g = 0; g < G; ++g) {
    const int64_t src_block = int64_t{order[g]} * H;
    float* dst = out.data() + int64_t{g} * H * I;
    for (int64_t p = 0; p < H * I; ++p) dst[p] = k.data[(p / H) * cols + src_block + p % H];
  }
  return out;
}

// CuDNN recurrent kernel [H, G*H]: gate block g is cuDNN's R_g [H, H] (Keras transposes it).
std::vector<float> FromCudnnRecurrent(const Array& k, int G, int H, const std::vector<int>& order) {
  const int64_t cols = int64_t{G} * H;
  std::vector<float> out(cols * H);  // [G*H, H]
  for (int g = 0; g < G; ++g) {
    const int64_t src_block = int64_t{order[g]} * H;
    for (int j = 0; j < H; ++j) {
      std::copy_n(k.data.data() + int64_t{j} * cols + src_block, H,
                  out.data() + (int64_t{g} * H + j) * H);
    }
  }
  return out;
}

std::vector<float> ReorderBias(const float* b, int G, int H, const std::vector<int>& order) {
  std::vector<float> out(static_cast<size_t>(G) * H);  // [G*H]
  for (int g = 0; g < G; ++g) std::copy_n(b + int64_t{order[g]} * H, H, out.data() + g * H);
  return out;
}

// Whether an LSTM / GRU layer's weights at arrays[used] are in the CuDNN layout, as Keras's
// _convert_rnn_weights decides it: three arrays whose bias is flat with 8H (LSTM) or 6H (GRU)
// values. Keras refuses CuDNNGRU weights for a GRU(reset_after=False), and so does this.
absl::StatusOr<bool> CudnnWeightsUnderPlainClass(const LayerContext& ctx, const std::string& name,
                                                 const std::string& cls, const Json& config,
                                                 CellType cell, int H,
                                                 const std::vector<Array>& arrays, size_t used) {
  if (cls != "LSTM" && cls != "GRU") return false;
  if (arrays.size() < used + 3 || !Get<bool>(config, "use_bias", true)) return false;
  const Array& bias = arrays[used + 2];
  const int64_t cudnn_size = int64_t{cell == CellType::kLstm ? 8 : 6} * H;
  if (bias.shape.size() != 1 || bias.size() != cudnn_size) return false;
  if (cell == CellType::kGru && !Get<bool>(config, "reset_after", false)) {
    return LayerError(ctx, name, cls,
                      absl::StrCat("bias has ", cudnn_size,
                                   " values in the CuDNNGRU layout, which Keras loads only into "
                                   "a GRU with reset_after=True; this GRU has reset_after=False"));
  }
  return true;
}

// Converts one direction's arrays starting at arrays[*used]; advances *used.
absl::StatusOr<engine::RecurrentSpec> ConvertCell(const LayerContext& ctx, const std::string& name,
                                                  const std::string& cls, const Json& config,
                                                  const std::vector<Array>& arrays, size_t* used,
                                                  bool reverse, bool processing_order) {
  engine::RecurrentSpec spec;
  const bool cudnn_class = cls == "CuDNNLSTM" || cls == "CuDNNGRU";
  spec.cell = (cls == "LSTM" || cls == "CuDNNLSTM") ? CellType::kLstm
              : (cls == "GRU" || cls == "CuDNNGRU") ? CellType::kGru
                                                    : CellType::kSimpleRnn;
  const int H = Get<int>(config, "units", 0);
  if (H <= 0) return LayerError(ctx, name, cls, "'units' must be a positive integer");
  // Weights in the CuDNN layout under an LSTM / GRU architecture (a CuDNN model's save_weights
  // loaded into its CPU twin): Keras tells them apart by the bias alone, and converts them.
  auto cudnn_weights =
      CudnnWeightsUnderPlainClass(ctx, name, cls, config, spec.cell, H, arrays, *used);
  if (!cudnn_weights.ok()) return cudnn_weights.status();
  const bool cudnn = cudnn_class || *cudnn_weights;
  if (Get<bool>(config, "time_major", false)) {
    return LayerError(ctx, name, cls, "time_major=True is not supported (expected False)");
  }
  spec.hidden_size = H;
  spec.return_sequences = Get<bool>(config, "return_sequences", false);
  spec.return_state = Get<bool>(config, "return_state", false);
  const bool use_bias = cudnn || Get<bool>(config, "use_bias", true);
  // GRU configs from before Keras 2.3 have no reset_after key and mean False.
  spec.reset_after = cudnn || Get<bool>(config, "reset_after", false);

  engine::RecurrentDirection dir;
  if (!cudnn_class) {  // CuDNN layers are sigmoid/tanh; an LSTM/GRU config says its own
    const Json* act = Find(config, "activation");
    auto a = ParseActivation(ctx, name, cls, act ? *act : Json("tanh"));
    if (!a.ok()) return a.status();
    if (spec.cell == CellType::kSimpleRnn) {
      dir.f = *a;
    } else {
      const bool old = ctx.keras_major < 2 || (ctx.keras_major == 2 && ctx.keras_minor < 3);
      const Json* rec = Find(config, "recurrent_activation");
      auto r = ParseActivation(ctx, name, cls, rec ? *rec : Json(old ? "hard_sigmoid" : "sigmoid"));
      if (!r.ok()) return r.status();
      dir.f = *r;
      dir.g = dir.h = *a;
    }
  }

  const int G = spec.gates();
  const int64_t gh = int64_t{G} * H;
  const size_t need = use_bias ? 3 : 2;
  if (arrays.size() < *used + need) {
    return LayerError(ctx, name, cls,
                      absl::StrCat("expected ", need, " weight arrays (kernel, recurrent kernel",
                                   use_bias ? ", bias" : "", "), found ", arrays.size() - *used));
  }
  const Array& kernel = arrays[*used];
  const Array& recurrent = arrays[*used + 1];
  if (kernel.shape.size() != 2 || kernel.shape[1] != gh || kernel.shape[0] <= 0) {
    return LayerError(ctx, name, cls,
                      absl::StrCat("kernel has shape [", absl::StrJoin(kernel.shape, ", "),
                                   "], expected [I, ", gh, "]"));
  }
  if (recurrent.shape.size() != 2 || recurrent.shape[0] != H || recurrent.shape[1] != gh) {
    return LayerError(
        ctx, name, cls,
        absl::StrCat("recurrent kernel has shape [", absl::StrJoin(recurrent.shape, ", "),
                     "], expected [", H, ", ", gh, "]"));
  }
  spec.input_size = static_cast<int>(kernel.shape[0]);
  const std::vector<int>& order = GateOrder(spec.cell);
  dir.W = cudnn ? FromCudnnInput(kernel, G, H, order) : FromKeras(kernel, G, H, order);
  dir.R = cudnn ? FromCudnnRecurrent(recurrent, G, H, order) : FromKeras(recurrent, G, H, order);
  dir.bW.assign(gh, 0.0f);
  dir.bR.assign(gh, 0.0f);
  if (use_bias) {
    const Array& bias = arrays[*used + 2];
    const bool two_rows = spec.cell == CellType::kGru && spec.reset_after;
    const int64_t want = (cudnn || two_rows) ? 2 * gh : gh;
    if (bias.size() != want) {
      return LayerError(ctx, name, cls,
                        absl::StrCat("bias has ", bias.size(), " values, expected ", want,
                                     spec.cell == CellType::kGru
                                         ? (spec.reset_after ? " (reset_after=True: [2, 3H])"
                                                             : " (reset_after=False: [3H])")
                                         : ""));
    }
    // [4H] / [3H]: input bias. [2, 3H], [8H], [6H]: input biases, then recurrent biases.
    dir.bW = ReorderBias(bias.data.data(), G, H, order);
    if (want == 2 * gh) dir.bR = ReorderBias(bias.data.data() + gh, G, H, order);
  }
  *used += need;
  dir.reverse = reverse;
  dir.outputs_in_processing_order = processing_order;
  spec.directions.push_back(std::move(dir));
  return spec;
}

}  // namespace

bool IsRecurrentClass(const std::string& cls) {
  return cls == "LSTM" || cls == "GRU" || cls == "SimpleRNN" || cls == "CuDNNLSTM" ||
         cls == "CuDNNGRU";
}

absl::StatusOr<engine::RecurrentSpec> ConvertRecurrentLayer(const LayerContext& ctx,
                                                            const std::string& name,
                                                            const std::string& cls,
                                                            const Json& config,
                                                            const std::vector<Array>& arrays) {
  size_t used = 0;
  // go_backwards outside Bidirectional: Keras returns outputs in processing order.
  const bool backwards = Get<bool>(config, "go_backwards", false);
  auto spec = ConvertCell(ctx, name, cls, config, arrays, &used, backwards, backwards);
  if (spec.ok() && used != arrays.size()) {
    return LayerError(ctx, name, cls,
                      absl::StrCat("has ", arrays.size(), " weight arrays, expected ", used));
  }
  return spec;
}

absl::StatusOr<engine::RecurrentSpec> ConvertBidirectional(const LayerContext& ctx,
                                                           const std::string& name,
                                                           const Json& config,
                                                           const std::vector<Array>& arrays) {
  const std::string cls = "Bidirectional";
  const Json* inner = Find(config, "layer");
  if (!inner) return LayerError(ctx, name, cls, "no inner 'layer' in the config");
  const std::string inner_cls = Get<std::string>(*inner, "class_name", "");
  const Json* inner_cfg = Find(*inner, "config");
  if (!IsRecurrentClass(inner_cls) || !inner_cfg) {
    return LayerError(ctx, name, cls,
                      absl::StrCat("wraps '", inner_cls,
                                   "'; expected LSTM, GRU, SimpleRNN, CuDNNLSTM or CuDNNGRU"));
  }
  // Keras builds the backward layer from the inner config with go_backwards flipped, unless
  // the file stores its own backward_layer config. Both halves' outputs are time-aligned.
  const Json* bw_layer = Find(config, "backward_layer");
  const Json* bw_cfg = bw_layer ? Find(*bw_layer, "config") : nullptr;
  const bool fw_backwards = Get<bool>(*inner_cfg, "go_backwards", false);
  const bool bw_backwards = bw_cfg ? Get<bool>(*bw_cfg, "go_backwards", true) : !fw_backwards;
  size_t used = 0;
  auto fw = ConvertCell(ctx, name, inner_cls, *inner_cfg, arrays, &used, fw_backwards, false);
  if (!fw.ok()) return fw.status();
  auto bw = ConvertCell(ctx, name, inner_cls, bw_cfg ? *bw_cfg : *inner_cfg, arrays, &used,
                        bw_backwards, false);
  if (!bw.ok()) return bw.status();
  if (used != arrays.size()) {
    return LayerError(ctx, name, cls,
                      absl::StrCat("has ", arrays.size(), " weight arrays, expected ", used));
  }
  if (bw->hidden_size != fw->hidden_size || bw->input_size != fw->input_size) {
    return LayerError(ctx, name, cls, "forward and backward layers differ in size");
  }
  fw->directions.push_back(std::move(bw->directions[0]));
  const Json* mm = Find(config, "merge_mode");
  const std::string merge = mm && mm->is_string() ? mm->get<std::string>() : "None";
  if (merge == "None") {
    fw->merge = engine::MergeMode::kNone;
  } else if (merge == "concat") {
    fw->merge = engine::MergeMode::kConcat;
  } else if (merge == "sum") {
    fw->merge = engine::MergeMode::kSum;
  } else if (merge == "mul") {
    fw->merge = engine::MergeMode::kMul;
  } else if (merge == "ave") {
    fw->merge = engine::MergeMode::kAve;
  } else {
    return LayerError(
        ctx, name, cls,
        absl::StrCat("merge_mode '", merge, "' is not one of concat, sum, mul, ave, None"));
  }
  // Keras forces zero outputs at masked steps in both halves when they return sequences.
  fw->zero_output_for_mask = fw->return_sequences;
  return fw;
}

}  // namespace rnnserve::models::keras
