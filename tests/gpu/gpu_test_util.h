#pragma once

// Shared pieces of the GPU tests: the skip-where-there-is-no-GPU check, compiling a model on
// either engine, random recurrent models built directly in the IR, error measures, and (through
// gpu_tolerances.h) the tolerances.

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/ir.h"
#include "gtest/gtest.h"
#include "tests/gpu/gpu_tolerances.h"

namespace rnnserve::testing {

// Empty when a GPU and the CUDA engine are present; otherwise why not (for GTEST_SKIP).
inline std::string NoGpuReason() {
  std::string why;
  if (engine::CudaAvailable(&why)) return "";
  return why.empty() ? std::string("no GPU") : why;
}

#define RNNSERVE_SKIP_WITHOUT_GPU()                               \
  do {                                                            \
    if (const std::string why = NoGpuReason(); !why.empty()) {    \
      GTEST_SKIP() << "needs a GPU and the CUDA engine: " << why; \
    }                                                             \
  } while (0)

inline absl::StatusOr<std::unique_ptr<engine::CompiledModel>> CompileOn(
    engine::EngineKind kind, const engine::Model& model,
    engine::MathMode math = engine::MathMode::kFp32) {
  auto e = engine::Engine::Create({.kind = kind});
  if (!e.ok()) return e.status();
  return (*e)->Compile(model, {.math_mode = math});
}

// ||got - want|| / ||want|| over all elements (want given as doubles).
inline double RelativeError(const engine::Tensor& got, const std::vector<double>& want) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got.f32()[i]) - want[i];
    num += d * d;
    den += want[i] * want[i];
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline std::vector<double> Doubles(const engine::Tensor& t) {
  return std::vector<double>(t.f32(), t.f32() + t.num_elements());
}

inline std::vector<float> RandomVector(std::mt19937* rng, size_t n, float scale) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(*rng);
  return v;
}

struct RandomRnnOptions {
  engine::CellType cell = engine::CellType::kLstm;
  int input = 8;
  int hidden = 16;
  int proj = 0;
  int directions = 1;
  engine::MergeMode merge = engine::MergeMode::kConcat;
  bool return_sequences = true;
  bool return_state = false;
  bool initial_states = false;  // the layer reads h0 (and c0) from model inputs
  engine::MaskSemantics masking = engine::MaskSemantics::kKeras;
  bool zero_output_for_mask = false;
  engine::Activation recurrent_activation =
      engine::Activation::Of(engine::ActivationKind::kSigmoid);
  engine::Activation activation = engine::Activation::Of(engine::ActivationKind::kTanh);
  bool reset_after = true;
  bool peepholes = false;
  float clip = 0.0f;
  bool input_forget = false;
  bool lone_reverse = false;  // one direction, reversed (ONNX reverse / Keras go_backwards)
  bool outputs_in_processing_order = false;  // with lone_reverse: Keras go_backwards
  bool masking_layer = false;  // a Keras Masking (mask_value 0) before the recurrent layer
  uint32_t seed = 1;
};

// One recurrent layer over input 0 ([B, T, I]); with initial_states, inputs 1.. are the
// states ([B, size] each, h then c per direction). Every layer output is a model output.
inline engine::Model RandomRnnModel(const RandomRnnOptions& o) {
  std::mt19937 rng(o.seed);
  engine::RecurrentSpec spec;
  spec.cell = o.cell;
  spec.input_size = o.input;
  spec.hidden_size = o.hidden;
  spec.proj_size = o.proj;
  spec.return_sequences = o.return_sequences;
  spec.return_state = o.return_state;
  spec.merge = o.merge;
  spec.masking = o.masking;
  spec.zero_output_for_mask = o.zero_output_for_mask;
  spec.reset_after = o.reset_after;
  spec.clip = o.clip;
  spec.input_forget = o.input_forget;
  const int G = spec.gates(), H = o.hidden, Hp = spec.output_size();
  const float scale = 1.0f / std::sqrt(static_cast<float>(H));
  for (int d = 0; d < o.directions; ++d) {
    engine::RecurrentDirection dir;
    dir.reverse = d == 1 || o.lone_reverse;
    dir.outputs_in_processing_order = o.outputs_in_processing_order;
    if (o.cell == engine::CellType::kSimpleRnn) {
      dir.f = o.activation;
    } else {
      dir.f = o.recurrent_activation;
      dir.g = o.activation;
      dir.h = o.activation;
    }
    dir.W = RandomVector(&rng, size_t(G) * H * o.input, scale);
    dir.R = RandomVector(&rng, size_t(G) * H * Hp, scale);
    dir.bW = RandomVector(&rng, size_t(G) * H, scale);
    dir.bR = RandomVector(&rng, size_t(G) * H, scale);
    if (o.proj > 0) dir.P = RandomVector(&rng, size_t(o.proj) * H, scale);
    if (o.peepholes) dir.peephole = RandomVector(&rng, size_t(3) * H, scale);
    spec.directions.push_back(std::move(dir));
  }
  engine::Model m;
  m.name = "random_rnn";
  m.inputs.push_back({"x", engine::DType::kFloat32, {-1, -1, o.input}});
  engine::Layer layer;
  layer.name = "rnn";
  layer.source_class = "test";
  layer.inputs = {0};
  const int per_dir = o.cell == engine::CellType::kLstm ? 2 : 1;
  if (o.initial_states) {
    for (int d = 0; d < o.directions; ++d) {
      for (int k = 0; k < per_dir; ++k) {
        layer.inputs.push_back(static_cast<int>(m.inputs.size()));
        m.inputs.push_back({"state", engine::DType::kFloat32, {-1, k == 0 ? Hp : H}});
      }
    }
  }
  int next = static_cast<int>(m.inputs.size());
  if (o.masking_layer) {
    engine::Layer mask;
    mask.name = "masking";
    mask.source_class = "Masking";
    mask.inputs = {0};
    mask.outputs = {next};
    mask.spec = engine::MaskingSpec{};
    layer.inputs[0] = next++;
    m.layers.push_back(std::move(mask));
  }
  int n_out = o.directions == 2 && o.merge == engine::MergeMode::kNone ? 2 : 1;
  if (o.return_state) n_out += o.directions * per_dir;
  for (int i = 0; i < n_out; ++i) {
    layer.outputs.push_back(next);
    m.output_values.push_back(next);
    m.outputs.push_back({"out", engine::DType::kFloat32, {}});
    ++next;
  }
  layer.spec = std::move(spec);
  m.layers.push_back(std::move(layer));
  m.num_values = next;
  return m;
}

}  // namespace rnnserve::testing
