// Servable's run for Evaluate's cross-entropy losses: the model with the logits of a final
// softmax or sigmoid as one more output (server/evaluate/keras_logits.h).

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/batch_util.h"
#include "server/batching/abandon_watch.h"
#include "server/evaluate/keras_logits.h"
#include "server/servable.h"

namespace rnnserve::server {

bool Servable::HasOutputLogits(int output) const {
  // Keras models keep their batch on axis 0; one whose axes the servable moves is not one.
  return !moves_batch_axes_ && evaluate::FindOutputLogits(model_, output).has_value();
}

absl::Status Servable::RunWithLogits(int output, engine::Batch batch,
                                     std::vector<engine::Tensor>* outputs,
                                     const RunOptions& options) const {
  const std::optional<evaluate::OutputLogits> logits =
      HasOutputLogits(output) ? evaluate::FindOutputLogits(model_, output) : std::nullopt;
  if (!logits) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", name(), "': output ", output,
                     " does not come from a softmax or sigmoid whose logits Keras reads"));
  }
  absl::MutexLock lock(&logits_mu_);
  if (absl::Now() > options.deadline) {
    return absl::DeadlineExceededError("deadline passed before the request ran");
  }
  std::unique_ptr<engine::CompiledModel>& compiled = logits_models_[output];
  if (!compiled) {
    auto engine = MakeEngine(first_engine_);
    if (!engine.ok()) return engine.status();
    auto c =
        (*engine)->Compile(evaluate::WithLogitsOutput(model_, output, *logits), first_compile_);
    if (!c.ok()) {
      return absl::Status(
          c.status().code(),
          absl::StrCat(source_file_, " with its logits as an output: ", c.status().message()));
    }
    compiled = std::move(*c);
  }
  batch.stop =
      batching::StopWhenAbandoned(options.cancelled, options.deadline, batching::RealClock());
  // The engine stopped: say why.
  auto stopped = [&options](const absl::Status& s) {
    if (!absl::IsCancelled(s)) return s;
    const absl::Status why = batching::Abandoned(options.cancelled, options.deadline, absl::Now());
    return why.ok() ? s : why;
  };
  const int64_t B = batch.inputs.empty() ? 0 : batch.inputs[0].dim(0);
  const int64_t limit = max_batch_size() > 0 ? max_batch_size() : B;
  if (B <= limit) return stopped(compiled->Run(batch, outputs));
  std::vector<std::vector<engine::Tensor>> parts;
  for (int64_t begin = 0; begin < B; begin += limit) {
    std::vector<engine::Tensor> out;
    engine::Batch part = SliceBatch(batch, begin, std::min(B, begin + limit));
    part.stop = batch.stop;
    if (auto s = compiled->Run(part, &out); !s.ok()) return stopped(s);
    parts.push_back(std::move(out));
  }
  outputs->clear();
  for (size_t o = 0; o < parts[0].size(); ++o) {
    std::vector<engine::Tensor> pieces;
    for (auto& p : parts) pieces.push_back(std::move(p[o]));
    outputs->push_back(ConcatRows(pieces));
  }
  return absl::OkStatus();
}

}  // namespace rnnserve::server
