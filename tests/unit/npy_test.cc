#include "client/npy.h"

#include <cstdio>
#include <filesystem>

#include "gtest/gtest.h"
#include "tests/support/fixtures.h"

namespace rnnserve::client {
namespace {

TEST(Npy, ReadsNumpyWrittenFloat64AndInt32) {
  auto expected = ReadNpy(testing::SourcePath("tests/fixtures/example/expected.npy"));
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_EQ(expected->descr, "<f8");
  EXPECT_EQ(expected->shape, (std::vector<int64_t>{3, 3}));
  auto lengths = ReadNpy(testing::SourcePath("tests/fixtures/example/lengths.npy"));
  ASSERT_TRUE(lengths.ok());
  EXPECT_TRUE(lengths->is_integer());
  EXPECT_EQ(lengths->values, (std::vector<double>{40, 25, 12}));
}

TEST(Npy, RoundTripsThroughNpz) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "rnnserve_npy_test.npz").string();
  ASSERT_TRUE(
      WriteNpz(path, {{"probabilities", SerializeNpyFloat32({2, 2}, {1, 2, 3, 4.5f})}}).ok());
  auto arrays = ReadNpz(path);
  ASSERT_TRUE(arrays.ok()) << arrays.status();
  ASSERT_EQ(arrays->count("probabilities"), 1u);
  EXPECT_EQ(arrays->at("probabilities").values, (std::vector<double>{1, 2, 3, 4.5}));
  std::remove(path.c_str());
}

TEST(Npy, RejectsTruncatedDataWithClearError) {
  std::string bytes = SerializeNpyFloat32({4}, {1, 2, 3, 4});
  bytes.resize(bytes.size() - 3);
  auto a = ParseNpy(bytes, "x.npy");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("truncated"), std::string::npos) << a.status();
}

}  // namespace
}  // namespace rnnserve::client
