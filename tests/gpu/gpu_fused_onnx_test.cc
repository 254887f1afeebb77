// FusedRnn's kernels against onnxruntime's answers for single ONNX LSTM and GRU nodes
// (models/scripts/make_onnx_fixtures.py): GRU linear_before_reset=0 (Keras's reset_after=False),
// which cuDNN cannot run, on the batch-tiled kernel (one direction, and both in one launch) and
// the one-block register kernel, and the one-block
// register kernel past 8 sequences (a block a group of sequences), pinned and as the engine's
// chooser runs it.

#include <cuda_runtime_api.h>

#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "client/npy.h"
#include "engine/cuda/cudnn_rnn.h"
#include "engine/cuda/fused_rnn.h"
#include "gtest/gtest.h"
#include "models/model_loader.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/gpu_tolerances.h"
#include "tests/gpu/stream_and_handle.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

using engine::cuda::DeviceBuffer;
using engine::cuda::FusedRnn;
using engine::cuda::RecurrentIO;

// One fixture of tests/fixtures/onnx/node/: an LSTM or GRU node of one forward direction, or
// forward and reverse, over N sequences of mixed lengths with initial states (in_0 X [T, N, I],
// in_1 sequence_lens, in_2 initial_h [D, N, H], LSTM: in_3 initial_c; out_0 Y [T, D, N, H],
// out_1 Y_h, LSTM: out_2 Y_c), on the device batch-major.
class OnnxRecurrentCase {
 public:
  void Load(const std::string& name) {
    const std::string dir = SourcePath("tests/fixtures/onnx/node/" + name + "/");
    auto model = models::LoadModelFile(dir + "model.onnx", models::LoadOptions{});
    ASSERT_TRUE(model.ok()) << model.status();
    const engine::RecurrentSpec* spec = nullptr;
    for (const auto& layer : model->layers) {
      if (const auto* r = std::get_if<engine::RecurrentSpec>(&layer.spec)) spec = r;
    }
    ASSERT_NE(spec, nullptr);
    spec_ = *spec;
    lstm_ = spec_.cell == engine::CellType::kLstm;
    auto data = client::ReadNpz(dir + "data.npz");
    ASSERT_TRUE(data.ok()) << data.status();
    data_ = *std::move(data);
    const client::NpyArray& x = data_.at("in_0");
    T_ = static_cast<int>(x.shape[0]);
    N_ = static_cast<int>(x.shape[1]);
    I_ = static_cast<int>(x.shape[2]);
    H_ = spec_.hidden_size;
    D_ = static_cast<int>(spec_.directions.size());
    // x [T, N, I] -> [N, T, I].
    std::vector<float> xb(size_t(N_) * T_ * I_);
    for (int t = 0; t < T_; ++t) {
      for (int b = 0; b < N_; ++b) {
        for (int i = 0; i < I_; ++i) {
          xb[(size_t(b) * T_ + t) * I_ + i] =
              static_cast<float>(x.values[(size_t(t) * N_ + b) * I_ + i]);
        }
      }
    }
    const client::NpyArray& lens = data_.at("in_1");
    lengths_.assign(lens.values.begin(), lens.values.end());
    Upload(xb, &dx_);
    const size_t states = size_t(D_) * N_ * H_ * 4;
    ASSERT_TRUE(dh0_.Reserve(states).ok());
    if (lstm_) {
      ASSERT_TRUE(dc0_.Reserve(states).ok());
      ASSERT_TRUE(dc_.Reserve(states).ok());
    }
    ASSERT_TRUE(dy_.Reserve(size_t(N_) * T_ * D_ * H_ * 4).ok());
    ASSERT_TRUE(dh_.Reserve(states).ok());
    ASSERT_TRUE(dl_.Reserve(N_ * 4).ok());
    cudaMemcpy(dl_.get(), lengths_.data(), N_ * 4, cudaMemcpyHostToDevice);
  }

  const engine::RecurrentSpec& spec() const { return spec_; }
  int sequences() const { return N_; }

  // The first B sequences (their initial states [D, B, H]), their y set to NaN bits (every
  // element must be written).
  RecurrentIO IO(int B) {
    Upload(First(data_.at("in_2"), B), &dh0_);
    if (lstm_) Upload(First(data_.at("in_3"), B), &dc0_);
    cudaMemset(dy_.get(), 0xff, size_t(B) * T_ * D_ * H_ * 4);
    return RecurrentIO{.B = B,
                       .T = T_,
                       .lengths = absl::MakeConstSpan(lengths_.data(), B),
                       .lengths_dev = dl_.as<int32_t>(),
                       .x = dx_.as<float>(),
                       .h0 = dh0_.as<float>(),
                       .c0 = lstm_ ? dc0_.as<float>() : nullptr,
                       .y = dy_.as<float>(),
                       .hy = dh_.as<float>(),
                       .cy = lstm_ ? dc_.as<float>() : nullptr};
  }

  // Y (zero past each length), Y_h and the LSTM's Y_c of the first B sequences, after `stream`.
  void Check(int B, cudaStream_t stream) const {
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    engine::Tensor y = engine::Tensor::Float({B, T_, D_ * H_});
    engine::Tensor h = engine::Tensor::Float({D_, B, H_});
    cudaMemcpy(y.f32(), dy_.get(), y.num_elements() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(h.f32(), dh_.get(), h.num_elements() * 4, cudaMemcpyDeviceToHost);
    const client::NpyArray& y_want = data_.at("out_0");  // [T, D, N, H]
    client::NpyArray yw{.descr = "<f4", .shape = {B, T_, D_ * H_}};
    for (int b = 0; b < B; ++b) {
      for (int t = 0; t < T_; ++t) {
        for (int d = 0; d < D_; ++d) {
          for (int j = 0; j < H_; ++j) {
            yw.values.push_back(y_want.values[((size_t(t) * D_ + d) * N_ + b) * H_ + j]);
          }
        }
      }
    }
    EXPECT_TRUE(AllClose(y, yw, kFp32Exact)) << "Y";
    EXPECT_TRUE(AllClose(h, First(data_.at("out_1"), B), kFp32Exact)) << "Y_h";
    if (lstm_) {
      engine::Tensor c = engine::Tensor::Float({D_, B, H_});
      cudaMemcpy(c.f32(), dc_.get(), c.num_elements() * 4, cudaMemcpyDeviceToHost);
      EXPECT_TRUE(AllClose(c, First(data_.at("out_2"), B), kFp32Exact)) << "Y_c";
    }
  }

 private:
  static void Upload(const std::vector<float>& v, DeviceBuffer* to) {
    ASSERT_TRUE(to->Reserve(v.size() * 4).ok());
    cudaMemcpy(to->get(), v.data(), v.size() * 4, cudaMemcpyHostToDevice);
  }
  static void Upload(const client::NpyArray& a, DeviceBuffer* to) {
    Upload(std::vector<float>(a.values.begin(), a.values.end()), to);
  }
  // A state [D, N, H]'s first B sequences of each direction.
  client::NpyArray First(const client::NpyArray& state, int B) const {
    client::NpyArray out{.descr = "<f4", .shape = {D_, B, H_}};
    for (int d = 0; d < D_; ++d) {
      const auto from = state.values.begin() + size_t(d) * N_ * H_;
      out.values.insert(out.values.end(), from, from + size_t(B) * H_);
    }
    return out;
  }

  engine::RecurrentSpec spec_;
  bool lstm_ = false;
  std::map<std::string, client::NpyArray> data_;
  int T_ = 0, N_ = 0, I_ = 0, H_ = 0, D_ = 1;
  std::vector<int32_t> lengths_;
  DeviceBuffer dx_, dh0_, dc0_, dy_, dh_, dc_, dl_;
};

// Runs `forward` on each of `batches` of the case, checking each.
void CheckBatches(OnnxRecurrentCase& c, const std::vector<int>& batches, cudaStream_t stream,
                  const std::function<absl::Status(const RecurrentIO&)>& forward) {
  for (int B : batches) {
    SCOPED_TRACE(::testing::Message() << "B=" << B);
    ASSERT_TRUE(forward(c.IO(B)).ok());
    c.Check(B, stream);
    if (::testing::Test::HasFailure()) return;
  }
}

// Every shape of the batch-tiled kernel that `fused` offers, pinned, on `batches` of the case.
void CheckEveryBatchedShape(OnnxRecurrentCase& c, FusedRnn& fused, const std::vector<int>& batches,
                            cudaStream_t stream) {
  for (const auto& shape : fused.batched_shapes()) {
    SCOPED_TRACE(::testing::Message() << "blocks=" << shape.blocks << " tile=" << shape.tile
                                      << " groups=" << shape.groups);
    CheckBatches(c, batches, stream,
                 [&](const RecurrentIO& io) { return fused.ForwardBatched(io, shape); });
    if (::testing::Test::HasFailure()) return;
  }
}

// GRU reset_after=False on the batch-tiled kernel: a second GEMM a step over r * h(t-1). Every
// shape pinned at batches 9..24 of a fixture of 24 sequences.
TEST(BatchedOnnxTest, GruResetBeforeEveryShapeMatchesOnnxruntime) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  OnnxRecurrentCase c;
  ASSERT_NO_FATAL_FAILURE(c.Load("GruLinearBeforeReset0H128B24MatchesOnnxruntime"));
  ASSERT_FALSE(c.spec().reset_after);
  StreamAndHandle sh;
  ASSERT_TRUE(sh.ok());
  auto fused = FusedRnn::Create(c.spec(), sh.stream);
  ASSERT_TRUE(fused.ok()) << fused.status();
  ASSERT_TRUE((*fused)->has_batched());
  CheckEveryBatchedShape(c, **fused, {9, 16, 24}, sh.stream);
}

// Both directions of a GRU reset_after=False in one launch of the batch-tiled kernel (half of
// the SMs each, the reverse direction from each sequence's last step): every shape pinned at
// batches of 1, 7 and 20 of mixed lengths; and of the register kernel (each direction on blocks
// of its own), in every number of units a block and of groups offered, at every batch up to
// kMaxBatch; then as FusedRnn's own choice (ForwardFastest, as the engine's model runs the
// layer: at kMaxBatch sequences the register or batch-tiled kernel, whichever is faster). Batches
// past kMaxBatchedBatch are not taken.
TEST(BatchedOnnxTest, GruResetBeforeBidirectionalEveryShapeMatchesOnnxruntime) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  OnnxRecurrentCase c;
  ASSERT_NO_FATAL_FAILURE(c.Load("GruLinearBeforeReset0BidirH128B20MatchesOnnxruntime"));
  ASSERT_FALSE(c.spec().reset_after);
  ASSERT_EQ(c.spec().directions.size(), 2u);
  StreamAndHandle sh;
  ASSERT_TRUE(sh.ok());
  auto fused = FusedRnn::Create(c.spec(), sh.stream);
  ASSERT_TRUE(fused.ok()) << fused.status();
  ASSERT_TRUE((*fused)->has_batched());
  ASSERT_FALSE((*fused)->register_units().empty());
  EXPECT_FALSE((*fused)->has_cluster());
  EXPECT_TRUE((*fused)->Takes(FusedRnn::kMaxBatchedBatch));
  EXPECT_FALSE((*fused)->Takes(FusedRnn::kMaxBatchedBatch + 1));
  CheckEveryBatchedShape(c, **fused, {1, 7, 20}, sh.stream);
  if (HasFailure()) return;
  std::vector<int> small(FusedRnn::kMaxBatch);
  for (int B = 1; B <= FusedRnn::kMaxBatch; ++B) small[B - 1] = B;
  for (int units : (*fused)->register_units()) {
    SCOPED_TRACE(::testing::Message() << "registers, " << units << " units a block");
    CheckBatches(c, small, sh.stream,
                 [&](const RecurrentIO& io) { return (*fused)->ForwardRegisters(io, units); });
    if (HasFailure()) return;
  }
  for (const auto& [units, groups] : (*fused)->register_groups()) {
    SCOPED_TRACE(::testing::Message()
                 << "registers, " << units << " units, " << groups << " groups");
    CheckBatches(c, {2 * groups, FusedRnn::kMaxBatch}, sh.stream, [&](const RecurrentIO& io) {
      return (*fused)->ForwardRegisters(io, units, groups);
    });
    if (HasFailure()) return;
  }
  EXPECT_EQ((*fused)->KernelTaking(FusedRnn::kMaxBatch), FusedRnn::Kernel::kGrid);
  EXPECT_EQ((*fused)->KernelTaking(c.sequences()), FusedRnn::Kernel::kBatched);
  CheckBatches(c, {FusedRnn::kMaxBatch, c.sequences()}, sh.stream,
               [&](const RecurrentIO& io) { return (*fused)->ForwardFastest(io); });
  EXPECT_EQ((*fused)->FastestKernelFor(c.sequences()), FusedRnn::Kernel::kBatched);
  EXPECT_FALSE((*fused)->BatchedKernelFor(c.sequences()).empty());
  // Both were timed at kMaxBatch sequences.
  EXPECT_FALSE((*fused)->GridKernelFor(FusedRnn::kMaxBatch).empty());
  EXPECT_FALSE((*fused)->BatchedKernelFor(FusedRnn::kMaxBatch).empty());
}

// GRU reset_after=False up to 64 units on the one-block register kernel (r * h(t-1) through
// shared memory, a second barrier a step), pinned with each number of lanes a unit it is
// offered, at every batch size (a block a group of that many sequences, and a block a
// sequence); H = 48 leaves 16 of its
// units idle. Then 24 sequences of H = 40, pinned and as FusedRnn's own choice
// (ForwardFastest, as the engine's model runs a layer that cuDNN cannot).
TEST(OneBlockRegisterOnnxTest, GruResetBeforeEveryBatchSizeMatchesOnnxruntime) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  StreamAndHandle sh;
  ASSERT_TRUE(sh.ok());
  for (const char* name : {"GruLinearBeforeReset0H48B8MatchesOnnxruntime",
                           "GruLinearBeforeReset0H40B24MatchesOnnxruntime"}) {
    SCOPED_TRACE(name);
    OnnxRecurrentCase c;
    ASSERT_NO_FATAL_FAILURE(c.Load(name));
    ASSERT_FALSE(c.spec().reset_after);
    auto fused = FusedRnn::Create(c.spec(), sh.stream);
    ASSERT_TRUE(fused.ok()) << fused.status();
    ASSERT_TRUE((*fused)->has_one_block_registers());
    EXPECT_EQ((*fused)->one_block_register_lanes(), (std::vector<int>{2, 4, 8}));
    std::vector<int> batches;
    for (int B = 1; B <= c.sequences(); B += B < 8 ? 1 : 5) batches.push_back(B);
    for (int lanes : (*fused)->one_block_register_lanes()) {
      for (int per_block : {lanes, 1}) {
        SCOPED_TRACE(::testing::Message() << lanes << " lanes, " << per_block << " a block");
        CheckBatches(c, batches, sh.stream, [&](const RecurrentIO& io) {
          return (*fused)->ForwardOneBlockRegisters(io, lanes, per_block);
        });
        if (HasFailure()) return;
      }
    }
    EXPECT_TRUE((*fused)->Takes(c.sequences()));
    CheckBatches(c, {c.sequences()}, sh.stream,
                 [&](const RecurrentIO& io) { return (*fused)->ForwardFastest(io); });
    EXPECT_NE((*fused)->GridKernelFor(c.sequences()).find("one_block_reg"), std::string::npos);
  }
}

// An LSTM of 56 units past 8 sequences: the one-block register kernel is the fused algorithm
// there (a block a group of sequences), pinned through the layer at 9..20 sequences, and the
// engine's chooser (which times it against cuDNN's algorithms) matches onnxruntime too.
TEST(OneBlockRegisterOnnxTest, LstmPastEightSequencesMatchesOnnxruntime) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  OnnxRecurrentCase c;
  ASSERT_NO_FATAL_FAILURE(c.Load("LstmH56B20MatchesOnnxruntime"));
  StreamAndHandle sh;
  ASSERT_TRUE(sh.ok());
  using engine::cuda::CudnnRecurrent;
  auto pinned =
      CudnnRecurrent::Create(c.spec(), "lstm", engine::MathMode::kFp32, sh.handle, sh.stream);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  ASSERT_TRUE((*pinned)->ForceAlgorithm(engine::cuda::kFusedAlgo).ok());
  CheckBatches(c, {9, 13, 16, 20}, sh.stream,
               [&](const RecurrentIO& io) { return (*pinned)->Forward(io); });
  EXPECT_NE((*pinned)->AlgorithmFor(20, 11).find("one_block_reg"), std::string::npos)
      << (*pinned)->AlgorithmFor(20, 11);
  auto chosen =
      CudnnRecurrent::Create(c.spec(), "lstm", engine::MathMode::kFp32, sh.handle, sh.stream);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  CheckBatches(c, {20}, sh.stream, [&](const RecurrentIO& io) { return (*chosen)->Forward(io); });
  std::cout << "LSTM H=56 B=20 T=11: " << (*chosen)->ChoicesSummary() << "\n";
}

}  // namespace
}  // namespace rnnserve::testing
