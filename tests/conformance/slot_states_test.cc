// Slot states (engine/slot_states.h) against real Keras: a case's rows run in two chunks, each
// row from a slot of its own (slots out of row order, rows in a different order each chunk),
// give Keras's predictions of the whole sequences, and the states read back from the slots are
// Keras's final states. On the CPU engine (label conformance: host slot states) and the GPU
// engine (label gpu: slot states in device memory). Plus the calls' checks, and a reused slot
// starting from what is written into it.

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "engine/slot_states.h"
#include "gtest/gtest.h"
#include "models/model_loader.h"
#include "server/batch_util.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/gpu_tolerances.h"
#include "tests/support/fixtures.h"
#include "tests/support/keras_corpus.h"

namespace rnnserve::testing {
namespace {

using engine::EngineKind;
using Json = nlohmann::json;

struct Loaded {
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<engine::CompiledModel> model;
  engine::StateRows rows;  // the recurrent layers' state rows, as the engine reports them
  std::vector<engine::Tensor> inputs;
  std::string dir;
};

void Load(const std::string& name, EngineKind kind, Loaded* out) {
  const Json& c = KerasCorpusManifest()["cases"][name];
  out->dir = std::string(kKerasCorpus) + "/" + name;
  auto model = models::LoadModelFile(
      SourcePath(out->dir + "/" + c["files"][0]["file"].get<std::string>()), {});
  ASSERT_TRUE(model.ok()) << model.status();
  auto engine = engine::Engine::Create({.kind = kind});
  ASSERT_TRUE(engine.ok()) << engine.status();
  out->engine = *std::move(engine);
  auto compiled = out->engine->Compile(*model, {});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  out->model = *std::move(compiled);
  for (const Json& in : c["inputs"]) {
    out->inputs.push_back(ToFloatTensor(LoadNpy(out->dir + "/" + in.get<std::string>())));
  }
  // The state rows: a one-row batch's final states.
  engine::Batch probe;
  for (const engine::Tensor& t : out->inputs) probe.inputs.push_back(server::SliceRows(t, 0, 1));
  engine::StateMap finals;
  probe.final_states = &finals;
  std::vector<engine::Tensor> ignored;
  ASSERT_TRUE(out->model->Run(probe, &ignored).ok());
  for (const auto& [layer, tensors] : finals) {
    for (const engine::Tensor& t : tensors) {
      out->rows[layer].emplace_back(t.shape().begin() + 1, t.shape().end());
    }
  }
  ASSERT_FALSE(out->rows.empty());
}

// Steps [from, to) of a [B, T, ...] tensor's rows `order`, as [order.size(), to - from, ...].
engine::Tensor Window(const engine::Tensor& t, const std::vector<int64_t>& order, int64_t from,
                      int64_t to) {
  engine::Shape shape = t.shape();
  shape[0] = static_cast<int64_t>(order.size());
  shape[1] = to - from;
  engine::Tensor out = engine::Tensor::Float(shape);
  const int64_t step = t.num_elements() / (t.dim(0) * t.dim(1));
  for (size_t j = 0; j < order.size(); ++j) {
    std::copy_n(t.f32() + (order[j] * t.dim(1) + from) * step, (to - from) * step,
                out.f32() + static_cast<int64_t>(j) * (to - from) * step);
  }
  return out;
}

using Case = std::tuple<EngineKind, std::string>;
class SlotStatesKeras : public ::testing::TestWithParam<Case> {};

TEST_P(SlotStatesKeras, TwoChunksThroughSlotsMatchKerasWhole) {
  const auto& [kind, name] = GetParam();
  if (kind == EngineKind::kCuda) RNNSERVE_SKIP_WITHOUT_GPU();
  Loaded l;
  ASSERT_NO_FATAL_FAILURE(Load(name, kind, &l));
  const engine::Tensor& x = l.inputs[0];
  const int64_t B = x.dim(0), T = x.dim(1), k = T / 2 + 1;
  ASSERT_GE(T, 3);
  const int capacity = static_cast<int>(B) + 3;
  auto slots = engine::NewSlotStates(l.model.get(), l.rows, capacity);
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_STREQ((*slots)->where(), kind == EngineKind::kCuda ? "device" : "host");
  // Row r lives in slot capacity - 1 - 2r + rep mod capacity in repetition rep; the first chunk
  // runs the rows in order, the second reversed.
  auto slot_of = [&](int64_t r, int rep) {
    return static_cast<int32_t>((capacity - 1 - 2 * r + rep + 4 * capacity) % capacity);
  };
  std::vector<int64_t> forward(B), backward(B);
  for (int64_t r = 0; r < B; ++r) forward[r] = r, backward[r] = B - 1 - r;
  const Json& c = KerasCorpusManifest()["cases"][name];
  const Tolerance tol = kind == EngineKind::kCuda ? kFp32CrossEngine : kFp32Exact;
  // Three times over from zeros, through other slots each time: on the GPU engine a chunk's
  // shape runs eagerly, is then captured whole into a graph, and then replays it (one launch a
  // chunk).
  for (int rep = 0; rep < 3; ++rep) {
    SCOPED_TRACE(absl::StrCat("repetition ", rep));
    std::vector<engine::Tensor> outs[2];
    const std::vector<int64_t>* orders[2] = {&forward, &backward};
    for (int chunk = 0; chunk < 2; ++chunk) {
      const std::vector<int64_t>& order = *orders[chunk];
      std::vector<int32_t> rows;
      for (int64_t r : order) rows.push_back(slot_of(r, rep));
      if (chunk == 0) {
        ASSERT_TRUE((*slots)->Write(rows, {}).ok());  // zeros, as Keras starts
      }
      engine::Batch batch;
      for (const engine::Tensor& t : l.inputs) {
        batch.inputs.push_back(chunk == 0 ? Window(t, order, 0, k) : Window(t, order, k, T));
      }
      batch.continues = true;
      absl::Status st = (*slots)->Run(std::move(batch), rows, &outs[chunk]);
      ASSERT_TRUE(st.ok()) << "chunk " << chunk << ": " << st;
    }
    for (size_t o = 0; o < c["outputs"].size(); ++o) {
      const client::NpyArray want = LoadNpy(l.dir + "/" + c["outputs"][o].get<std::string>());
      const engine::Tensor& a = outs[0][o];
      const engine::Tensor& b = outs[1][o];
      const bool per_step = a.rank() == 3 && a.dim(1) == k && b.dim(1) == T - k;
      std::vector<engine::Tensor> rows;
      for (int64_t r = 0; r < B; ++r) {
        const engine::Tensor second = server::SliceRows(b, B - 1 - r, B - r);
        if (!per_step) {
          rows.push_back(second);
          continue;
        }
        const engine::Tensor first = server::SliceRows(a, r, r + 1);
        engine::Shape shape = first.shape();
        shape[1] = T;
        engine::Tensor whole = engine::Tensor::Float(shape);
        std::copy_n(first.f32(), first.num_elements(), whole.f32());
        std::copy_n(second.f32(), second.num_elements(), whole.f32() + first.num_elements());
        rows.push_back(std::move(whole));
      }
      EXPECT_TRUE(AllClose(server::ConcatRows(rows), want, tol)) << "output " << o;
    }
  }
  if (kind == EngineKind::kCuda && name.find("Masking") == std::string::npos) {
    const engine::RunCounters counters = l.model->counters();
    EXPECT_GE(counters.graph_replays, 2) << counters.graph_note;  // both chunks' shapes
  }
  // Keras's return_state outputs are the final states: the slots must hold the same.
  if (name == "Keras2LstmReturnState") {
    std::vector<int32_t> rows;
    for (int64_t r = 0; r < B; ++r) rows.push_back(slot_of(r, 2));
    engine::StateMap states;
    ASSERT_TRUE((*slots)->Read(rows, &states).ok());
    ASSERT_EQ(states.size(), 1u);
    const std::vector<engine::Tensor>& hc = states.begin()->second;
    ASSERT_EQ(hc.size(), 2u);
    EXPECT_TRUE(AllClose(hc[0], LoadNpy(l.dir + "/expected_1.npy"), tol)) << "h";
    EXPECT_TRUE(AllClose(hc[1], LoadNpy(l.dir + "/expected_2.npy"), tol)) << "c";
  }
}

std::vector<Case> Cases(EngineKind kind) {
  std::vector<Case> cases;
  for (const char* n :
       {"Keras2LstmLastOutput", "Keras2LstmReturnState", "Keras2StackedLstm",
        "Keras2GruResetAfterTrue", "Keras2GruResetAfterFalse", "Keras2LstmHardSigmoid",
        "Keras2MaskingMixedLengths", "Keras2MaskingReturnSequencesRepeatsLastOutput",
        "Keras2LstmReturnSequencesTimeDistributedSoftmax"}) {
    cases.emplace_back(kind, n);
  }
  return cases;
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) { return std::get<1>(info.param); }

// Instances are named Cpu and Gpu: tests/CMakeLists.txt labels */Gpu gpu and the rest as given.
INSTANTIATE_TEST_SUITE_P(Cpu, SlotStatesKeras, ::testing::ValuesIn(Cases(EngineKind::kCpu)),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Gpu, SlotStatesKeras, ::testing::ValuesIn(Cases(EngineKind::kCuda)),
                         CaseName);

class SlotStatesCalls : public ::testing::TestWithParam<EngineKind> {};

TEST_P(SlotStatesCalls, CheckSlotsAndReuseStartsFromWhatIsWritten) {
  const EngineKind kind = GetParam();
  if (kind == EngineKind::kCuda) RNNSERVE_SKIP_WITHOUT_GPU();
  Loaded l;
  ASSERT_NO_FATAL_FAILURE(Load("Keras2LstmReturnState", kind, &l));
  auto slots = engine::NewSlotStates(l.model.get(), l.rows, 4);
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_EQ(engine::NewSlotStates(l.model.get(), l.rows, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*slots)->Write({1, 1}, {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*slots)->Write({4}, {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*slots)->Write({-1}, {}).code(), absl::StatusCode::kInvalidArgument);
  engine::StateMap unknown;
  unknown["no_such_layer"].push_back(engine::Tensor::Float({1, 3}));
  EXPECT_EQ((*slots)->Write({0}, unknown).code(), absl::StatusCode::kInvalidArgument);
  const std::string layer = l.rows.begin()->first;
  engine::StateMap wrong;
  wrong[layer].push_back(engine::Tensor::Float({1, 1}));  // h alone, of the wrong width
  EXPECT_EQ((*slots)->Write({0}, wrong).code(), absl::StatusCode::kInvalidArgument);

  engine::Batch one;
  for (const engine::Tensor& t : l.inputs) one.inputs.push_back(server::SliceRows(t, 0, 1));
  std::vector<engine::Tensor> out;
  EXPECT_EQ((*slots)->Run(one, {0, 1}, &out).code(), absl::StatusCode::kInvalidArgument);
  engine::Batch with_states = one;
  engine::StateMap finals;
  with_states.final_states = &finals;
  EXPECT_EQ((*slots)->Run(with_states, {0}, &out).code(), absl::StatusCode::kInvalidArgument);

  // Written states come back as they went in, other slots untouched (zeros).
  engine::StateMap given;
  for (const engine::Shape& row : l.rows.at(layer)) {
    engine::Shape shape = {2};
    shape.insert(shape.end(), row.begin(), row.end());
    engine::Tensor t = engine::Tensor::Float(shape);
    for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = 0.25f * static_cast<float>(i + 1);
    given[layer].push_back(std::move(t));
  }
  ASSERT_TRUE((*slots)->Write({3, 1}, given).ok());
  engine::StateMap back;
  ASSERT_TRUE((*slots)->Read({3, 1, 2}, &back).ok());
  for (size_t i = 0; i < given[layer].size(); ++i) {
    const engine::Tensor& w = given[layer][i];
    const engine::Tensor& r = back[layer][i];
    ASSERT_EQ(r.dim(0), 3);
    for (int64_t e = 0; e < w.num_elements(); ++e) EXPECT_EQ(r.f32()[e], w.f32()[e]);
    for (int64_t e = w.num_elements(); e < r.num_elements(); ++e) EXPECT_EQ(r.f32()[e], 0.0f);
  }
  // A slot used by one sequence, then zeroed for the next, gives that sequence Keras's answer.
  ASSERT_TRUE((*slots)->Run(one, {3}, &out).ok());
  ASSERT_TRUE((*slots)->Write({3}, {}).ok());
  ASSERT_TRUE((*slots)->Run(one, {3}, &out).ok());
  const Tolerance tol = kind == EngineKind::kCuda ? kFp32CrossEngine : kFp32Exact;
  const client::NpyArray h = LoadNpy(l.dir + "/expected_1.npy");
  engine::StateMap last;
  ASSERT_TRUE((*slots)->Read({3}, &last).ok());
  const engine::Tensor want = server::SliceRows(ToFloatTensor(h), 0, 1);
  ASSERT_EQ(last[layer][0].shape(), want.shape());
  for (int64_t e = 0; e < want.num_elements(); ++e) {
    const double w = want.f32()[e];
    EXPECT_NEAR(last[layer][0].f32()[e], w, tol.atol + tol.rtol * std::abs(w))
        << "h, element " << e;
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, SlotStatesCalls, ::testing::Values(EngineKind::kCpu));
INSTANTIATE_TEST_SUITE_P(Gpu, SlotStatesCalls, ::testing::Values(EngineKind::kCuda));

}  // namespace
}  // namespace rnnserve::testing
