// The sequence record of the shared state store (server/store/state_record.h): what is written
// reads back the same, and whatever else comes back from the store is DATA_LOSS, never a crash.

#include "server/store/state_record.h"

#include <cstring>

#include "gtest/gtest.h"

namespace rnnserve::server::store {
namespace {

// Two layers: a bidirectional LSTM (h, c per direction) and a GRU (h).
StateShapes Shapes() { return {{"lstm", {{1, 3}, {1, 3}, {1, 3}, {1, 3}}}, {"gru", {{1, 2}}}}; }

SequenceRecord Record() {
  SequenceRecord r{
      .model_version = 3, .steps = 17, .epoch = 5, .owner = "token:abc", .client = "token:abc"};
  for (int i = 0; i < 4; ++i) {
    r.states["lstm"].push_back(engine::Tensor::Float({1, 3}, {0.5f * i, -1.25f, 3e-8f + i}));
  }
  r.states["gru"].push_back(engine::Tensor::Float({1, 2}, {7.0f, -0.0f}));
  return r;
}

TEST(StoreRecordTest, RoundTripKeepsStatesPositionOwnerAndVersion) {
  const SequenceRecord want = Record();
  auto got = DecodeRecord(EncodeRecord(want), Shapes());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->model_version, 3);
  EXPECT_EQ(got->steps, 17);
  EXPECT_EQ(got->epoch, 5u);
  EXPECT_EQ(got->owner, "token:abc");
  EXPECT_EQ(got->client, "token:abc");
  ASSERT_EQ(got->states.size(), 2u);
  for (const auto& [layer, states] : want.states) {
    ASSERT_EQ(got->states.at(layer).size(), states.size()) << layer;
    for (size_t i = 0; i < states.size(); ++i) {
      const engine::Tensor& g = got->states.at(layer)[i];
      ASSERT_EQ(g.shape(), states[i].shape());
      EXPECT_EQ(std::memcmp(g.f32(), states[i].f32(), 4 * g.num_elements()), 0) << layer << i;
    }
  }
  auto header = DecodeHeader(EncodeRecord(want));
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->owner, "token:abc");
  EXPECT_TRUE(header->states.empty());
}

TEST(StoreRecordTest, EmptyStatesAreAStartedSequence) {
  SequenceRecord r{.model_version = 1, .epoch = 1, .owner = "o"};
  auto got = DecodeRecord(EncodeRecord(r), Shapes());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->states.empty());
}

TEST(StoreRecordTest, EveryTruncationIsDataLoss) {
  const std::string bytes = EncodeRecord(Record());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto got = DecodeRecord(bytes.substr(0, n), Shapes());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << "prefix of " << n;
  }
}

TEST(StoreRecordTest, TrailingBytesAreDataLoss) {
  auto got = DecodeRecord(EncodeRecord(Record()) + "x", Shapes());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("after the last state"), std::string::npos);
}

TEST(StoreRecordTest, OtherMagicOrFormatVersionIsDataLoss) {
  std::string bytes = EncodeRecord(Record());
  std::string other = bytes;
  other[0] = 'X';
  EXPECT_EQ(DecodeRecord(other, Shapes()).status().code(), absl::StatusCode::kDataLoss);
  other = bytes;
  other[4] = 2;  // format version 2
  auto got = DecodeRecord(other, Shapes());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("format version 2"), std::string::npos) << got.status();
}

TEST(StoreRecordTest, StateShapeOtherThanTheModelsIsDataLoss) {
  StateShapes shapes = Shapes();
  shapes["gru"] = {{1, 5}};  // the model's GRU has 5 units, the record 2
  auto got = DecodeRecord(EncodeRecord(Record()), shapes);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("layer 'gru' state 0 is [1,2], expected [1,5]"),
            std::string::npos)
      << got.status();
}

TEST(StoreRecordTest, StateCountOrLayerOtherThanTheModelsIsDataLoss) {
  StateShapes fewer = Shapes();
  fewer["lstm"].resize(2);  // a unidirectional LSTM
  EXPECT_EQ(DecodeRecord(EncodeRecord(Record()), fewer).status().code(),
            absl::StatusCode::kDataLoss);
  StateShapes other = {{"lstm", Shapes()["lstm"]}, {"dense", {{1, 2}}}};
  auto got = DecodeRecord(EncodeRecord(Record()), other);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("'gru', which is no recurrent layer"), std::string::npos)
      << got.status();
}

TEST(StoreRecordTest, HugeLengthsAreDataLossWithoutAllocating) {
  std::string bytes = EncodeRecord(Record());
  // The owner's length (after magic 4, format 2, flags 2, version 8, steps 8, epoch 8).
  const uint32_t huge = 0xFFFFFFF0u;
  std::string other = bytes;
  std::memcpy(&other[32], &huge, 4);
  EXPECT_EQ(DecodeRecord(other, Shapes()).status().code(), absl::StatusCode::kDataLoss);
  // Every byte flipped in turn: DATA_LOSS or a record, never a crash.
  for (size_t i = 0; i < bytes.size(); ++i) {
    other = bytes;
    other[i] = static_cast<char>(other[i] ^ 0xFF);
    auto got = DecodeRecord(other, Shapes());
    if (!got.ok()) {
      EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << i;
    }
  }
}

TEST(StoreRecordTest, StateShapesOfAModelArePerDirectionHThenC) {
  engine::Model model;
  engine::RecurrentSpec lstm{.cell = engine::CellType::kLstm, .hidden_size = 4, .proj_size = 2};
  lstm.directions.resize(2);
  engine::RecurrentSpec gru{.cell = engine::CellType::kGru, .hidden_size = 3};
  gru.directions.resize(1);
  model.layers.push_back({.name = "bi_lstm", .spec = lstm});
  model.layers.push_back({.name = "dense", .spec = engine::DenseSpec{}});
  model.layers.push_back({.name = "gru", .spec = gru});
  const StateShapes shapes = StateShapesOf(model);
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes.at("bi_lstm"), (std::vector<engine::Shape>{{1, 2}, {1, 4}, {1, 2}, {1, 4}}));
  EXPECT_EQ(shapes.at("gru"), (std::vector<engine::Shape>{{1, 3}}));
}

}  // namespace
}  // namespace rnnserve::server::store
