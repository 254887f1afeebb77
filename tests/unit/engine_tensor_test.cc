// engine::Tensor's two kinds of storage: its own vector, and memory shared with an owner
// (Tensor::Wrap, how the GPU engine hands out page-locked blocks). A copy never aliases the
// wrapped memory; a move carries it and the owner; the owner is released with the last tensor.

#include <memory>
#include <utility>
#include <vector>

#include "engine/tensor.h"
#include "gtest/gtest.h"

namespace rnnserve::engine {
namespace {

// Memory whose release is observable.
struct Block {
  explicit Block(size_t n, bool* released) : values(n), released(released) {}
  ~Block() { *released = true; }
  std::vector<float> values;
  bool* released;
};

TEST(TensorTest, WrappedTensorReadsAndWritesTheOwnersMemory) {
  bool released = false;
  auto block = std::make_shared<Block>(6, &released);
  float* data = block->values.data();
  Tensor t = Tensor::Wrap(DType::kFloat32, {2, 3}, data, block);
  block.reset();
  EXPECT_TRUE(t.wrapped());
  EXPECT_EQ(t.f32(), data);
  EXPECT_EQ(t.floats().size(), 6u);
  EXPECT_TRUE(t.ints().empty());
  t.f32()[4] = 2.5f;
  EXPECT_EQ(data[4], 2.5f);
  EXPECT_FALSE(released);
  t = Tensor();
  EXPECT_TRUE(released);
}

TEST(TensorTest, CopyOfAWrappedTensorOwnsItsData) {
  bool released = false;
  auto block = std::make_shared<Block>(4, &released);
  for (int i = 0; i < 4; ++i) block->values[i] = static_cast<float>(i);
  Tensor wrapped = Tensor::Wrap(DType::kFloat32, {4}, block->values.data(), block);
  Tensor copy = wrapped;
  EXPECT_FALSE(copy.wrapped());
  EXPECT_NE(copy.f32(), wrapped.f32());
  EXPECT_EQ(std::vector<float>(copy.floats().begin(), copy.floats().end()),
            (std::vector<float>{0, 1, 2, 3}));
  block->values[0] = 9.0f;
  EXPECT_EQ(copy.f32()[0], 0.0f);
  Tensor assigned = Tensor::Float({1});
  assigned = wrapped;
  EXPECT_FALSE(assigned.wrapped());
  EXPECT_EQ(assigned.f32()[0], 9.0f);
  EXPECT_EQ(assigned.shape(), (Shape{4}));
}

TEST(TensorTest, MoveCarriesTheWrappedMemoryAndTheOwner) {
  bool released = false;
  auto block = std::make_shared<Block>(2, &released);
  const int64_t* data = reinterpret_cast<const int64_t*>(block->values.data());
  Tensor a = Tensor::Wrap(DType::kInt64, {1}, block->values.data(), block);
  block.reset();
  Tensor b = std::move(a);
  EXPECT_TRUE(b.wrapped());
  EXPECT_EQ(b.i64(), data);
  EXPECT_EQ(b.ints().size(), 1u);
  EXPECT_FALSE(a.wrapped());  // NOLINT(bugprone-use-after-move): moved-from is empty
  std::vector<Tensor> outputs;
  outputs.push_back(std::move(b));
  outputs.reserve(16);  // relocation moves the tensor again
  EXPECT_EQ(outputs[0].i64(), data);
  EXPECT_FALSE(released);
  outputs.clear();
  EXPECT_TRUE(released);
}

TEST(TensorTest, OwnTensorsKeepValueSemantics) {
  Tensor a = Tensor::Float({2}, {1.0f, 2.0f});
  Tensor b = a;
  b.f32()[0] = 5.0f;
  EXPECT_EQ(a.f32()[0], 1.0f);
  EXPECT_FALSE(a.wrapped());
  Tensor c = std::move(b);
  EXPECT_EQ(c.f32()[0], 5.0f);
  EXPECT_EQ(Tensor::Int64({3}).ints().size(), 3u);
}

}  // namespace
}  // namespace rnnserve::engine
