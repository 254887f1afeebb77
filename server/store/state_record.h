#pragma once

// A stateful sequence as a shared store keeps it (server/store/redis_store.h): its recurrent
// states, its position, its owner, the model version it runs on, and an epoch that counts its
// chunks, in one versioned binary record.
//
// FORMAT (version 1; every integer little-endian, floats IEEE 754 binary32 little-endian)
//   "RNSQ"  u16 format version (1)  u16 flags (0)
//   i64 model version  i64 steps  u64 epoch
//   u32 n + n bytes: owner      u32 n + n bytes: client
//   u32 layers, then per layer: u32 n + n bytes name, u32 states, then per state:
//     u32 rank (1..4), rank x i64 dims, then NumElements(dims) x f32
//   nothing after the last state.
// A record read back is untrusted (the store is another process, possibly another build):
// DecodeRecord checks every length against what is left, the format version, and each state
// against the model's state shapes (StateShapesOf), and answers DATA_LOSS naming what is wrong;
// it never reads past the buffer and never allocates more than the record's own size.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/ir.h"
#include "server/core/state_store.h"

namespace rnnserve::server::store {

inline constexpr uint16_t kRecordFormat = 1;

struct SequenceRecord {
  int64_t model_version = 0;
  int64_t steps = 0;   // time steps of the chunks so far
  uint64_t epoch = 0;  // 1 after the start, +1 per chunk stored
  std::string owner;   // core::StateStore::Caller::owner
  std::string client;  // core::StateStore::Caller::client
  LayerStates states;  // empty: zeros (a sequence whose first chunk has not run)
};

// Per recurrent layer, the shape of each of its states for one sequence, in the engine's order
// (per direction h [1, output_size], then for LSTM c [1, hidden_size]).
using StateShapes = std::map<std::string, std::vector<engine::Shape>>;
StateShapes StateShapesOf(const engine::Model& model);

std::string EncodeRecord(const SequenceRecord& record);
// A layer the model has no states for, a state count or shape other than `shapes` says, a
// non-FP32 state, a truncated or overlong record, or an unknown format is DATA_LOSS.
absl::StatusOr<SequenceRecord> DecodeRecord(absl::string_view bytes, const StateShapes& shapes);
// The record without its states (model version, steps, epoch, owner, client): what a replica
// needs to check the owner and find the version's state shapes before DecodeRecord.
absl::StatusOr<SequenceRecord> DecodeHeader(absl::string_view bytes);

}  // namespace rnnserve::server::store
