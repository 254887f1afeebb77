// The one lengths rule (engine/lengths.h) that request validation, the batcher and both engines
// apply: none, or one per sequence, each in [0, T].

#include "engine/lengths.h"

#include <vector>

#include "gtest/gtest.h"

namespace rnnserve::engine {
namespace {

TEST(CheckLengthsTest, NoLengthsAndLengthsInZeroToTAreAccepted) {
  EXPECT_TRUE(CheckLengths({}, 3, 5).ok());
  EXPECT_TRUE(CheckLengths(std::vector<int32_t>{0, 5, 1}, 3, 5).ok());
}

TEST(CheckLengthsTest, CountOtherThanTheBatchNamesBoth) {
  const absl::Status s = CheckLengths(std::vector<int32_t>{4}, 2, 5);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "lengths: 1 given for a batch of 2");
}

TEST(CheckLengthsTest, NegativeOrPastTheTimeAxisNamesTheIndexAndTheRange) {
  EXPECT_EQ(CheckLengths(std::vector<int32_t>{5, -1}, 2, 5).message(),
            "lengths[1] = -1: must be in [0, 5]");
  const absl::Status s = CheckLengths(std::vector<int32_t>{6}, 1, 5, "input 'x': lengths");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "input 'x': lengths[0] = 6: must be in [0, 5]");
}

}  // namespace
}  // namespace rnnserve::engine
