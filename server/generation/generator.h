#pragma once

// Generator: runs the token loops of every generation in the process, stepping the
// generations of one model together: one engine call per token advances all of them.
//
// IN THE STEP-LEVEL SCHEDULER'S SLOTS
//   A stateful LM served with cellular_batching (not in a resident step loop) generates in the
//   model's step-level scheduler (server/batching/cellular_scheduler.h): each sample of a
//   generation is a sequence in a slot, a feedback request (cellular_feedback.h, slot_feedback.h)
//   whose prompt runs in chunks like any sequence and whose sampled token is fed back as its
//   next step's input, the states staying in the slot (on the GPU engine, in device memory). Its
//   tokens are sampled on the scheduler's worker as each chunk ends; its samples share each
//   chunk with the model's other generations and Predict sequences; cancellation and deadlines
//   free its slots before the next chunk; max_active bounds these generations too. Other models
//   (and fixed-window models, whose every token is a fresh window) use the worker below.
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
//   destructor, which ends the generations still running with FinishReason::kCancelled; it
//   cancels those in slots and waits for their schedulers to let them go). Models
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
#include <set>
#include <span>
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
  // Called after each event is queued and when the generation ends, on the thread that
  // stepped it; must not block or call Next with a timeout.
  using Listener = std::function<void()>;
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
  friend class SlotFeedback;
  struct Sample {
    std::vector<int64_t> context;  // prompt and tokens so far (windows read it)
    engine::StateMap states;       // stateful LM: [1, ...] per state, after `context`
    std::vector<float> row;        // the next token's output row; empty: to compute
    std::string text;              // generated text (stop strings)
    int32_t tokens = 0;
    int32_t draws = 0;  // tokens chosen so far, stop tokens included: the draws' step
    bool done = false;
  };
  Generation(std::shared_ptr<const Servable> model, ModelKind kind,
             std::shared_ptr<const Vocabulary> vocab, GenerateParams params, absl::Time deadline,
             Listener listener);
  // Chooses sample i's next token from `row` (its output row) into *event; returns whether the
  // sample goes on. Touches sample i alone (and atomics): samples may be chosen concurrently.
  bool SampleNext(size_t i, std::span<const float> row, StepEvent* event);
  void Push(StepEvent event);
  void End(absl::Status status);
  // The samples that have not finished (by the events pushed so far).
  std::vector<int32_t> Unfinished() const;

  const std::shared_ptr<const Servable> model_;
  const ModelKind kind_;
  const std::shared_ptr<const Vocabulary> vocab_;  // null: no vocab.json
  const GenerateParams params_;
  const absl::Time deadline_;
  const absl::Time started_ = absl::Now();
  const Listener listener_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> shutdown_{false};  // cancelled by the Generator's destructor
  std::atomic<int64_t> tokens_{0};
  // The worker's alone (in slots: sample i, the worker running its slot's).
  std::vector<Sample> samples_;
  bool prompt_ran_ = false;

  mutable absl::Mutex mu_;
  absl::Time first_token_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  std::vector<bool> finished_ ABSL_GUARDED_BY(mu_);  // per sample, by the events pushed
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
  // max_active (or past the model's cellular_batching.max_queue_size). `listener`, when set,
  // hears of each event and of the end (Generation::Listener).
  absl::StatusOr<std::shared_ptr<Generation>> Start(std::shared_ptr<const Servable> model,
                                                    GenerateParams params, absl::Time deadline,
                                                    Generation::Listener listener = nullptr);
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
  // Queues a stateful LM's generation in its model's step-level scheduler's slots.
  absl::Status StartInSlots(const std::shared_ptr<Generation>& g);
  // Its end there: OK, or why its scheduler let it go.
  void FinishInSlots(Generation& g, absl::Status status);

  const GeneratorOptions options_;
  StatsObserver observer_;
  absl::Mutex mu_;
  std::vector<std::shared_ptr<Generation>> queued_ ABSL_GUARDED_BY(mu_);
  int64_t active_count_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, std::shared_ptr<const Vocabulary>> vocabularies_ ABSL_GUARDED_BY(mu_);
  // The generations in slots, until they finish (each holds itself meanwhile, through its
  // request's `done`).
  std::set<Generation*> in_slots_ ABSL_GUARDED_BY(mu_);
  // The worker's alone.
  std::vector<std::shared_ptr<Generation>> active_;
  std::thread worker_;
};

}  // namespace rnnserve::server::generation
