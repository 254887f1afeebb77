// FusedRnn's stacked kernel on GRU reset_after=False (Keras 2's GRU before TF 2), which cuDNN
// cannot run, against Keras's answers for two such layers of 128 units one on the other
// (tests/fixtures/keras/Keras2StackedGruResetAfterFalseMasked: 8 masked sequences of mixed
// lengths up to 24 steps, past the ring of steps a layer may run ahead of the one above): pinned
// in each units a block at every batch size; through FusedRnn::ForwardChain eagerly and replayed
// from a graph; and through the GPU model, whose placement says how the pair ran.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/npy.h"
#include "engine/cuda/fused_rnn.h"
#include "gtest/gtest.h"
#include "models/model_loader.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/gpu_tolerances.h"
#include "tests/gpu/graph_replay.h"
#include "tests/gpu/stream_and_handle.h"
#include "tests/gpu/torch_state_dict.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

using engine::cuda::DeviceBuffer;
using engine::cuda::FusedRnn;
using engine::cuda::RecurrentIO;

constexpr char kCase[] = "tests/fixtures/keras/Keras2StackedGruResetAfterFalseMasked/";

using Forward = std::function<absl::Status(const std::vector<RecurrentIO>&)>;

class KerasGruBeforeStackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RNNSERVE_SKIP_WITHOUT_GPU();
    auto model = models::LoadModelFile(SourcePath(std::string(kCase) + "model.h5"), {});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    for (const auto& layer : model_.layers) {
      if (const auto* r = std::get_if<engine::RecurrentSpec>(&layer.spec)) spec_.push_back(*r);
    }
    ASSERT_EQ(spec_.size(), 2u);
    ASSERT_FALSE(spec_[0].reset_after);
    x_ = LoadNpy(std::string(kCase) + "input_0.npy");
    want_ = LoadNpy(std::string(kCase) + "expected_0.npy");
    N_ = static_cast<int>(x_.shape[0]);
    T_ = static_cast<int>(x_.shape[1]);
    I_ = static_cast<int>(x_.shape[2]);
    H_ = spec_[0].hidden_size;
    // Keras's Masking(0.0): each sequence runs to its last step with a non-zero feature.
    for (int b = 0; b < N_; ++b) {
      int len = 0;
      for (int t = 0; t < T_; ++t) {
        const auto* row = x_.values.data() + (size_t(b) * T_ + t) * I_;
        if (std::any_of(row, row + I_, [](double v) { return v != 0.0; })) len = t + 1;
      }
      lengths_.push_back(len);
    }
    sh_ = std::make_unique<StreamAndHandle>();
    ASSERT_TRUE(sh_->ok());
    for (const auto& spec : spec_) {
      auto f = FusedRnn::Create(spec, sh_->stream);
      ASSERT_TRUE(f.ok()) << f.status();
      fused_.push_back(*std::move(f));
    }
  }

  // Runs `forward` (both layers' io, bottom first) on the first B sequences, twice (the second
  // launch finds the first's words in the exchange), the outputs poisoned before each; compares
  // the top layer's y with Keras's over each sequence's steps (zero past them, where Keras
  // repeats the last output) and its h_n with Keras's output at the last step.
  void Check(int B, const Forward& forward) {
    const size_t y_bytes = size_t(B) * T_ * H_ * 4, h_bytes = size_t(B) * H_ * 4;
    std::vector<float> xf(x_.values.begin(), x_.values.begin() + size_t(B) * T_ * I_);
    const std::vector<int32_t> lengths(lengths_.begin(), lengths_.begin() + B);
    DeviceBuffer dx, dy[2], dh[2], dl;
    ASSERT_TRUE(dx.Reserve(xf.size() * 4).ok());
    ASSERT_TRUE(dl.Reserve(B * 4).ok());
    for (int l = 0; l < 2; ++l) {
      ASSERT_TRUE(dy[l].Reserve(y_bytes).ok());
      ASSERT_TRUE(dh[l].Reserve(h_bytes).ok());
    }
    cudaMemcpy(dx.get(), xf.data(), xf.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dl.get(), lengths.data(), B * 4, cudaMemcpyHostToDevice);
    std::vector<RecurrentIO> ios;
    for (int l = 0; l < 2; ++l) {
      ios.push_back({.B = B,
                     .T = T_,
                     .lengths = lengths,
                     .lengths_dev = dl.as<int32_t>(),
                     .x = l == 0 ? dx.as<float>() : dy[0].as<float>(),
                     .y = dy[l].as<float>(),
                     .hy = dh[l].as<float>()});
    }
    client::NpyArray y_want{.shape = {B, T_, H_}}, h_want{.shape = {B, H_}};
    for (int b = 0; b < B; ++b) {
      for (int t = 0; t < T_; ++t) {
        for (int j = 0; j < H_; ++j) {
          const double v = want_.values[(size_t(b) * T_ + t) * H_ + j];
          y_want.values.push_back(t < lengths[b] ? v : 0.0);
          if (t == lengths[b] - 1) h_want.values.push_back(v);
        }
      }
    }
    for (int run = 0; run < 2; ++run) {
      cudaMemset(dy[1].get(), 0xff, y_bytes);
      cudaMemset(dh[1].get(), 0xff, h_bytes);
      const absl::Status s = forward(ios);
      ASSERT_TRUE(s.ok()) << s;
      ASSERT_EQ(cudaStreamSynchronize(sh_->stream), cudaSuccess);
      engine::Tensor y = engine::Tensor::Float({B, T_, H_}), h = engine::Tensor::Float({B, H_});
      cudaMemcpy(y.f32(), dy[1].get(), y_bytes, cudaMemcpyDeviceToHost);
      cudaMemcpy(h.f32(), dh[1].get(), h_bytes, cudaMemcpyDeviceToHost);
      EXPECT_TRUE(AllClose(y, y_want, kFp32Exact)) << "y, B=" << B << ", run " << run;
      EXPECT_TRUE(AllClose(h, h_want, kFp32Exact)) << "h_n, B=" << B << ", run " << run;
    }
  }

  engine::Model model_;
  std::vector<engine::RecurrentSpec> spec_;
  client::NpyArray x_, want_;
  std::vector<int32_t> lengths_;
  int N_ = 0, T_ = 0, I_ = 0, H_ = 0;
  std::unique_ptr<StreamAndHandle> sh_;
  std::vector<std::unique_ptr<FusedRnn>> fused_;  // destroyed before the stream
};

// The stacked kernel, pinned in each units a block it is offered, at every batch size.
TEST_F(KerasGruBeforeStackTest, EveryUnitsAndBatchMatchesKeras) {
  ASSERT_GE(fused_[0]->max_stack_layers(), 2);
  ASSERT_TRUE(fused_[0]->Stacks(*fused_[1]));
  ASSERT_FALSE(fused_[0]->stack_units(2).empty());
  for (int units : fused_[0]->stack_units(2)) {
    for (int B = 1; B <= std::min(N_, FusedRnn::kMaxBatch); ++B) {
      SCOPED_TRACE(::testing::Message() << "units " << units << ", B=" << B);
      Check(B, [&](const std::vector<RecurrentIO>& ios) {
        return fused_[0]->ForwardStack(ios[0], *fused_[1], ios[1], units);
      });
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// FusedRnn::ForwardChain: the pair stacked or apart, whichever it timed faster, eagerly and
// replayed from a graph captured after the first batch.
TEST_F(KerasGruBeforeStackTest, ChainMatchesKerasEagerAndReplayed) {
  auto forward = [&](const std::vector<RecurrentIO>& ios) {
    return FusedRnn::ForwardChain({{fused_[0].get(), ios[0]}, {fused_[1].get(), ios[1]}});
  };
  for (int B : {1, 3, N_}) {
    SCOPED_TRACE(::testing::Message() << "B=" << B);
    Check(B, forward);
    EXPECT_NE(fused_[0]->ChainFor(B, T_), "") << "no choice recorded";
    std::cout << "B=" << B << ": " << fused_[0]->ChainFor(B, T_) << std::endl;
    Check(B, [&](const std::vector<RecurrentIO>& ios) {
      return ReplayTwice(sh_->stream, [&]() { return forward(ios); });
    });
  }
}

// The GPU model runs the pair as a chain (RunRecurrentStack), for the first 1, 3 and 8
// sequences, eagerly each time (Masking reads the request on the host), with Keras's numbers,
// and the lower layer's placement says how the pair ran.
TEST_F(KerasGruBeforeStackTest, ModelRunsThePairAsAChainWithKerasNumbers) {
  auto gpu = CompileOn(engine::EngineKind::kCuda, model_);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  for (int B : {1, 3, N_}) {
    SCOPED_TRACE(absl::StrCat("B=", B));
    std::vector<int> order(B);
    for (int r = 0; r < B; ++r) order[r] = r;
    engine::Batch batch{{ToFloatTensor(Rows(x_, 0, order))}, {}};
    const client::NpyArray want = Rows(want_, 0, order);
    std::vector<engine::Tensor> out;
    for (int run = 0; run < 2; ++run) {
      const absl::Status s = (*gpu)->Run(batch, &out);
      ASSERT_TRUE(s.ok()) << s;
      ASSERT_EQ(out.size(), 1u);
      EXPECT_TRUE(AllClose(out[0], want, kFp32Exact)) << "run " << run;
    }
  }
  const auto placements = (*gpu)->placements();
  ASSERT_EQ(placements.size(), model_.layers.size());
  for (size_t l = 0; l + 1 < placements.size(); ++l) {
    if (!std::holds_alternative<engine::RecurrentSpec>(model_.layers[l].spec)) continue;
    std::cout << placements[l].layer << ": " << placements[l].reason << std::endl;
    EXPECT_TRUE(absl::StrContains(placements[l].reason, "with the layers above"))
        << placements[l].reason;
    break;
  }
}

}  // namespace
}  // namespace rnnserve::testing
