#pragma once

// Generator: runs the token loops of every generation in the process, stepping the
// generations of one model together: one engine call per token advances all of them.
//
// PARAMETERS AND BEHAVIOR
//   Start() validates a request against its model (model_kind.h, request.h) and queues it; it
//   joins the running generations before the next step. The worker loops:
//   - drop: a generation whose client went away (Generation::Cancel) or whose deadline passed
//     leaves at once, before the next engine call, freeing its row;
//   - compute: for each model, a stateful LM's new generations run their prompts once (those
//     of one length in one engine call; each one's states and last output are copied to its n
//     samples); then one engine
//     call (split at the model's max_batch_size) advances every other live sample by one step
//     from its last token, the recurrent states of all rows gathered into the batch and
//     scattered back (host tensors, Batch::initial_states / final_states, `continues`). A
//     fixed-window model's samples go in one call of their windows;
//   - sample: each sample's next token is chosen from its output row on the host
//     (sampler.h: greedy or seeded), streamed, and checked against max_tokens and the stops.
//   Samples of a request that finish leave the batch; the request ends when all have.
//   - max_active: Start() answers RESOURCE_EXHAUSTED while this many generations run.
//
// THREADS
//   One worker thread for the process (started on the first Start(), joined by the
//   destructor, which ends the generations still running with FinishReason::kCancelled). Models
//   take turns on it, one step each. The engine calls go through Servable::Run, so they use
//   the model's scheduler and instances like any request.
//
// LATENCY BOUND
//   A new generation starts within one step of the running ones (plus the engine call of the
//   new prompts of its length); each token then costs one engine call over the model's live
//   samples.
//
// WHEN NOT TO USE
//   Models that are not language models (DetectKind refuses them).

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/slot_states.h"
#include "server/generation/request.h"

namespace rnnserve::server {
class Servable;
}

namespace rnnserve::server::generation {

struct GeneratorOptions {
  RequestLimits limits;
  // Generations running at once in the process; beyond: RESOURCE_EXHAUSTED. Must be positive.
  int64_t max_active = 4096;
};

// What a generation's timing was, for metrics; reported once when it ends.
struct GenerationStats {
  std::string model;
  int64_t version = 0;
  int64_t tokens = 0;            // over all samples
  absl::Duration time_to_first;  // from Start to the first token
  absl::Duration total;          // from Start to the end
};

// One request's generation, shared by its front end (which reads its events) and the worker.
class Generation {
 public:
  enum class Wait { kEvent, kTimeout, kEnd };
  // The next step's tokens and finishes, waiting at most `timeout`. kEnd: no more events;
  // status() then says how the generation ended (OK when every sample finished).
  Wait Next(StepEvent* event, absl::Duration timeout);
  // The client went away: the worker drops the generation before its next step.
  void Cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  absl::Status status() const;
  const std::shared_ptr<const Servable>& model() const { return model_; }

 private:
  friend class Generator;
  friend class ModelStep;
  struct Sample {
    std::vector<int64_t> context;  // prompt and tokens so far (windows read it)
    engine::StateMap states;       // stateful LM: [1, ...] per state, after `context`
    std::vector<float> row;        // the next token's output row; empty: to compute
    std::string text;              // generated text (stop strings)
    int32_t tokens = 0;
    bool done = false;
  };
  Generation(std::shared_ptr<const Servable> model, ModelKind kind,
             std::shared_ptr<const Vocabulary> vocab, GenerateParams params, absl::Time deadline);
  void Push(StepEvent event);
  void End(absl::Status status);

  const std::shared_ptr<const Servable> model_;
  const ModelKind kind_;
  const std::shared_ptr<const Vocabulary> vocab_;  // null: no vocab.json
  const GenerateParams params_;
  const absl::Time deadline_;
  const absl::Time started_ = absl::Now();
  std::atomic<bool> cancelled_{false};
  // The worker's alone.
  std::vector<Sample> samples_;
  bool prompt_ran_ = false;
  int64_t step_ = 0;
  int64_t tokens_ = 0;
  absl::Time first_token_ = absl::InfiniteFuture();

  mutable absl::Mutex mu_;
  std::deque<StepEvent> events_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

class Generator {
 public:
  using StatsObserver = std::function<void(const GenerationStats&)>;
  static absl::StatusOr<std::unique_ptr<Generator>> Create(const GeneratorOptions& options);
  ~Generator();

  // Validates `params` against `model` and queues the generation. FAILED_PRECONDITION for a
  // model that cannot generate, INVALID_ARGUMENT for a bad request, RESOURCE_EXHAUSTED past
  // max_active.
  absl::StatusOr<std::shared_ptr<Generation>> Start(std::shared_ptr<const Servable> model,
                                                    GenerateParams params, absl::Time deadline);
  // Called on the worker when a generation ends; set before the first Start().
  void SetObserver(StatsObserver observer) { observer_ = std::move(observer); }

 private:
  explicit Generator(const GeneratorOptions& options) : options_(options) {}
  // The vocabulary beside the model file, read once per file (null when there is none).
  absl::StatusOr<std::shared_ptr<const Vocabulary>> VocabularyOf(const Servable& model);
  void Loop();
  // One step of every live generation of one model.
  void StepModel(const std::vector<std::shared_ptr<Generation>>& gens);
  void SampleStep(Generation& g);
  void Finish(Generation& g, absl::Status status);

  const GeneratorOptions options_;
  StatsObserver observer_;
  absl::Mutex mu_;
  std::vector<std::shared_ptr<Generation>> queued_ ABSL_GUARDED_BY(mu_);
  int64_t active_count_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, std::shared_ptr<const Vocabulary>> vocabularies_ ABSL_GUARDED_BY(mu_);
  // The worker's alone.
  std::vector<std::shared_ptr<Generation>> active_;
  std::thread worker_;
};

}  // namespace rnnserve::server::generation
