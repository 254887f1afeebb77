#pragma once

// The protocol-neutral request every front end decodes into (rnnserve.v1 Predict, Evaluate and
// StreamPredict, KServe ModelInfer), and the one validation that turns it into an engine batch.
//
// A front end builds a Request out of views: each InputView points at the values as the gRPC
// message holds them (raw bytes, or a repeated field's array), so nothing is copied to decode.
// Validate() makes the engine batch; an input whose values the engine can read as they are
// (FP32 for a float input, INT64 for token ids, suitably aligned) becomes an engine tensor over
// the front end's bytes (engine::Tensor::Wrap, no copy); the rest (INT32 ids, float ids) is
// converted once. The front end's message must therefore outlive the run of its batch (a
// gRPC handler's request lives until the call finishes).
//
// Outputs go the other way through RunOptions::allocate_outputs: the front end hands the
// scheduler a tensor over its own response buffer, the scheduler writes the request's rows
// there, and the front end's encoder finds them in place (one copy from the engine to the wire).

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "engine/engine.h"
#include "engine/tensor.h"

namespace rnnserve::server {

struct TensorSignature {
  std::string name;
  engine::DType dtype = engine::DType::kFloat32;
  engine::Shape shape;  // in the file's layout; -1 marks a dynamic axis
  // The axis of `shape` that holds the batch: 0, or where the file has it (an ONNX state
  // [layers * directions, batch, hidden] or a time-major input: 1; server/batch_layout.h).
  int batch_axis = 0;
  bool reject_non_finite = false;
};

// Where output `index` (in the model's output order) of `dtype` and `shape` goes: a tensor
// over the front end's response buffer (engine::Tensor::Wrap), or an ordinary tensor for an
// output it does not send. Called at most once per output, by the thread that delivers the
// answer, before `done`.
using OutputAllocator =
    std::function<engine::Tensor(int index, engine::DType dtype, const engine::Shape& shape)>;

// Per-request scheduling options.
struct RunOptions {
  // The request fails with DEADLINE_EXCEEDED, costing no compute, if it has not started by then;
  // a running request's work stops at its next step boundary (see `cancelled`).
  absl::Time deadline = absl::InfiniteFuture();
  // With dynamic batching: 0 is the model's dynamic_batching.default_priority_level; 1 is
  // served first, then 2, up to priority_levels (larger values are INVALID_ARGUMENT). Levels
  // order the caller's own requests; callers take turns (server/batching/fair_queue.h).
  // Without dynamic batching priority plays no part.
  int priority = 0;
  // Whether the client has cancelled the call; null: it cannot. Every scheduler polls it, with
  // the deadline, and stops the request's work (server/batching/abandon_watch.h): waiting, it
  // is answered CANCELLED; running, its engine call stops at the next step boundary once no
  // request of the batch is still wanted; step-level batching drops its sequences from their
  // slots at the next chunk. Asked only until the answer is given.
  std::function<bool()> cancelled;
  // Who sent the request (server/limits/caller_identity.h: a hash of its token, or its peer);
  // a sequence belongs to the caller that started it, and callers take turns in a model's
  // queue (server/batching/fair_queue.h). Empty: unknown (one caller).
  std::string caller;
  // Where the dynamic batcher writes this request's rows of each output; null: tensors of
  // its own. Other paths hand over the engine's tensors, which the encoder copies once.
  OutputAllocator allocate_outputs;
};

namespace core {

// Element types a front end may declare (rnnserve.v1 DataType, KServe datatype strings).
enum class ElementType { kInvalid, kBool, kUint8, kInt32, kInt64, kFp16, kFp32, kFp64 };

// "TYPE_FP32", ...: the names errors use.
std::string ElementTypeName(ElementType type);
// Bytes of one element (1 for BOOL and UINT8, 2 for FP16).
int64_t ElementBytes(ElementType type);
// Whether `given` feeds an input of `want`: INT32 and INT64 feed integers, and so do FP32 and
// FP64 token ids (whole numbers, checked when decoded; Keras takes float ids). Floats take FP32.
bool Feeds(ElementType given, engine::DType want);

// One tensor as the front end received it: its values lie contiguously in `bytes`, row-major,
// as `type` (never copied; the front end's message owns them).
struct InputView {
  std::string name;
  ElementType type = ElementType::kInvalid;
  engine::Shape shape;
  absl::string_view bytes;
};

// The bytes of a contiguous array (a repeated field, a vector): what an InputView holds.
template <typename Values>
absl::string_view BytesOf(const Values& values) {
  return {reinterpret_cast<const char*>(values.data()), values.size() * sizeof(*values.data())};
}

struct Request {
  std::vector<InputView> inputs;  // keyed by model input name; a single-input model takes any
  std::vector<int32_t> lengths;   // per row; empty: every row is T long (engine/lengths.h)
  // Initial states of recurrent layers by layer name: per direction h then, for LSTM, c.
  std::map<std::string, std::vector<InputView>> initial_states;
  std::vector<std::string> output_filter;  // names; empty: every output
  // How it runs (deadline, priority, caller, where outputs go) is its RunOptions, and the
  // stateful sequence it continues, if any, a core::Chunk (sequence_runner.h).
};

// Whether a model honours per-row lengths (else why, naming the layer), and which of its
// inputs carry the time axis, [B, T, ...] or time-major [T, B, ...] (servable_load.cc).
struct LengthsSupport {
  absl::Status honored;
  std::vector<bool> sequence_inputs;
  bool time_major = false;
};

// What a request is checked against: the model's inputs (or a stream's, time axes free), its
// outputs, and which layers are recurrent (initial states name them).
struct Signature {
  const std::vector<TensorSignature>& inputs;
  const std::vector<TensorSignature>& outputs;
  std::function<bool(const std::string& layer)> is_recurrent_layer;
  const LengthsSupport* lengths = nullptr;  // null: lengths describe axis 1 of every input
};

// The one edge validation: names, dtypes, shapes (batch axis first), lengths, finite values
// and initial states; INVALID_ARGUMENT naming the input and the expected value. The batch's
// tensors view the request's bytes where no conversion is needed.
absl::StatusOr<engine::Batch> Validate(const Request& request, const Signature& signature);

// Checks the output filter against the model's outputs.
absl::Status ValidateOutputFilter(const Request& request, const Signature& signature);

// One view as an engine tensor: FP32 and INT32 / INT64 as they are declared (int64 in the
// engine), checking the count of values against the shape. `token_ids`: integers, and
// whole-number FP32 / FP64. `what` names the tensor in errors ("input 'x'").
absl::StatusOr<engine::Tensor> ToEngineTensor(const InputView& view, bool token_ids,
                                              const std::string& what);

}  // namespace core
}  // namespace rnnserve::server
