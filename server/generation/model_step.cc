#include "server/generation/model_step.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/servable.h"

namespace rnnserve::server::generation {
namespace {

// Row `r` of `t` [B, ...] as a [1, ...] tensor.
engine::Tensor RowOf(const engine::Tensor& t, int64_t r) {
  engine::Shape shape = t.shape();
  const int64_t n = engine::NumElements(shape) / shape[0];
  shape[0] = 1;
  return engine::Tensor::Float(shape, std::vector<float>(t.f32() + r * n, t.f32() + (r + 1) * n));
}

}  // namespace

engine::Tensor IdsTensor(const ModelKind& kind, int64_t b, int64_t t,
                         const std::vector<int64_t>& ids) {
  if (kind.input_dtype == engine::DType::kInt64) return engine::Tensor::Int64({b, t}, ids);
  std::vector<float> f(ids.begin(), ids.end());
  return engine::Tensor::Float({b, t}, std::move(f));
}

void ModelStep::RunPrompts(const std::vector<Generation*>& gens,
                           std::vector<std::pair<Generation*, absl::Status>>* failed) {
  if (gens.empty()) return;
  const Servable& model = *gens[0]->model_;
  const ModelKind& kind = gens[0]->kind_;
  // Prompts of one length share engine calls of at most max_batch_size rows.
  std::map<size_t, std::vector<Generation*>> by_length;
  for (Generation* g : gens) by_length[g->params_.prompt_ids.size()].push_back(g);
  for (const auto& [length, group] : by_length) {
    const int64_t t = static_cast<int64_t>(length);
    const int64_t n = static_cast<int64_t>(group.size());
    const int64_t most = model.max_batch_size() > 0 ? model.max_batch_size() : n;
    for (int64_t at = 0; at < n; at += most) {
      const int64_t b = std::min(most, n - at);
      std::vector<int64_t> ids;
      ids.reserve(b * t);
      for (int64_t r = 0; r < b; ++r) {
        const std::vector<int64_t>& p = group[at + r]->params_.prompt_ids;
        ids.insert(ids.end(), p.begin(), p.end());
      }
      engine::Batch batch;
      batch.inputs.push_back(IdsTensor(kind, b, t, ids));
      engine::StateMap states;
      batch.final_states = &states;
      std::vector<engine::Tensor> outputs;
      absl::Status s = model.Run(std::move(batch), &outputs);
      if (s.ok() && (outputs[0].rank() != 3 || outputs[0].dim(0) != b || outputs[0].dim(1) != t)) {
        s = absl::InternalError(absl::StrCat("model ", model.name(), " answered a prompt of ", b,
                                             "x", t, " with ",
                                             engine::ShapeString(outputs[0].shape())));
      }
      for (int64_t r = 0; r < b; ++r) {
        Generation& g = *group[at + r];
        if (!s.ok()) {
          failed->push_back({&g, s});
          continue;
        }
        const engine::Tensor& out = outputs[0];  // [B, T, V]
        const int64_t v = out.dim(2);
        const float* last = out.f32() + ((r * t) + (t - 1)) * v;
        engine::StateMap mine;
        for (const auto& [layer, tensors] : states) {
          for (const engine::Tensor& x : tensors) mine[layer].push_back(RowOf(x, r));
        }
        for (Generation::Sample& sample : g.samples_) {
          sample.states = mine;
          sample.row.assign(last, last + v);
        }
      }
    }
  }
}

absl::Status ModelStep::Step(const Servable& model, const ModelKind& kind,
                             const std::vector<Generation::Sample*>& rows) {
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t most = model.max_batch_size() > 0 ? model.max_batch_size() : n;
  for (int64_t at = 0; at < n; at += most) {
    if (auto s = StepPart(model, kind, rows.data() + at, std::min(most, n - at)); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ModelStep::StepPart(const Servable& model, const ModelKind& kind,
                                 Generation::Sample* const* rows, int64_t b) {
  engine::Batch batch;
  std::vector<int64_t> ids;
  if (kind.kind == ModelKind::kWindow) {
    // The last W tokens, left-padded with 0.
    const int64_t w = kind.window;
    ids.assign(b * w, 0);
    for (int64_t r = 0; r < b; ++r) {
      const std::vector<int64_t>& c = rows[r]->context;
      const int64_t k = std::min<int64_t>(w, static_cast<int64_t>(c.size()));
      std::copy(c.end() - k, c.end(), ids.begin() + r * w + (w - k));
    }
    batch.inputs.push_back(IdsTensor(kind, b, w, ids));
  } else {
    for (int64_t r = 0; r < b; ++r) ids.push_back(rows[r]->context.back());
    batch.inputs.push_back(IdsTensor(kind, b, 1, ids));
    // Every row's states, gathered: per layer and state, [B, ...].
    for (const auto& [layer, states] : rows[0]->states) {
      std::vector<engine::Tensor>& into = batch.initial_states[layer];
      for (size_t i = 0; i < states.size(); ++i) {
        engine::Shape shape = states[i].shape();
        const int64_t per_row = engine::NumElements(shape);
        shape[0] = b;
        engine::Tensor t = engine::Tensor::Float(shape);
        for (int64_t r = 0; r < b; ++r) {
          std::memcpy(t.f32() + r * per_row, rows[r]->states.at(layer)[i].f32(),
                      per_row * sizeof(float));
        }
        into.push_back(std::move(t));
      }
    }
    batch.continues = true;
  }
  engine::StateMap final_states;
  if (kind.kind == ModelKind::kStateful) batch.final_states = &final_states;
  std::vector<engine::Tensor> outputs;
  if (auto s = model.Run(std::move(batch), &outputs); !s.ok()) return s;
  const engine::Tensor& out = outputs[0];  // [B, V] or [B, 1, V]
  const int64_t v = out.shape().back();
  if (out.dim(0) != b || v != kind.vocab_size) {
    return absl::InternalError(absl::StrCat("model ", model.name(), " answered a step with ",
                                            engine::ShapeString(out.shape()), "; expected [", b,
                                            ", ..., ", kind.vocab_size, "]"));
  }
  for (int64_t r = 0; r < b; ++r) {
    rows[r]->row.assign(out.f32() + r * v, out.f32() + (r + 1) * v);
    if (kind.kind == ModelKind::kStateful) {
      for (auto& [layer, states] : final_states) {
        std::vector<engine::Tensor>& mine = rows[r]->states[layer];
        mine.clear();
        for (const engine::Tensor& t : states) mine.push_back(RowOf(t, r));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace rnnserve::server::generation
