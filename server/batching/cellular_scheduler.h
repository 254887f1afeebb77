#pragma once

// CellularScheduler: step-level ("cellular") batching of recurrent models. Sequences join the
// running batch between chunks of steps and leave it as soon as they reach their length.
//
// PARAMETERS AND BEHAVIOR
//   Schedule() splits a request (B sequences, batch_request.h) into B sequences and queues
//   them. Each instance has a worker and max_active_sequences slots. The worker loops:
//   - admit: queued sequences take free slots, first come first served; a sequence whose
//     deadline has passed before it got a slot fails with DEADLINE_EXCEEDED, costing nothing;
//     while every slot is taken, the queue is swept for such sequences (and cancelled ones)
//     once per kAbandonPollInterval, so they need not wait for a slot to be answered;
//   - drop: an active sequence whose request's deadline has passed leaves its slot with
//     DEADLINE_EXCEEDED, one whose client cancelled with CANCELLED (BatchRequest::cancelled);
//     its request fails, and its other sequences are dropped as they come up;
//   - advance: one engine call runs every active slot by min(chunk_steps, longest remaining)
//     steps, each slot by its own remaining steps at most (per-row lengths), starting from the
//     states its slot holds and leaving its final states there (cellular_chunk.h). The states
//     live in the instance's engine::SlotStates: on the GPU engine in device memory, so a chunk
//     moves only its inputs and outputs; a new sequence's states are written into its slot
//     before its first chunk, and read back only when its request asks for final states;
//   - feed back: a feedback request's row that ran its last step asks its StepFeedback for the
//     next step's input (cellular_feedback.h: a generated token) and keeps its slot to run it
//     in the next chunk, one step a chunk; or it ends and is finished like the rest;
//   - answer: a slot that reached its length is finished at once; its request is answered
//     when its last sequence finishes. A short sequence never waits for a long one, and a new
//     one waits at most one chunk for a slot (when slots are free).
//   Outputs and final states equal running each sequence whole (Predict): the model must be
//   causal (only unidirectional recurrent and per-step layers on the time axis); the servable
//   refuses the mode at load for other models, saying why.
//   - max_queue_size: Schedule() answers RESOURCE_EXHAUSTED while this many sequences wait
//     for a slot. 0: unbounded.
//   - An engine fault fails every request with a sequence in that chunk (INTERNAL/the fault),
//     and the others carry on.
//   - resident_step_loop: where every instance runs the model in a resident step loop
//     (engine/step_loop.h), the worker feeds and drains that loop instead of running chunks:
//     a sequence joins between two steps as soon as it has a slot and leaves after its own last
//     step (cellular_resident.cc). ChunkStats then report each drain (steps 1).
//
// THREADS AND SHUTDOWN
//   One worker per instance, the only thread that runs it. Drain() stops taking requests and
//   returns when every queued and active sequence has finished. The destructor fails what is
//   queued or active with UNAVAILABLE and joins the workers. `done` callbacks run on a worker
//   (or in the destructor) and must not call back into the scheduler.
//
// LATENCY BOUND
//   With a free slot, a sequence starts within one chunk of the running batch; it then takes
//   ceil(length / chunk_steps) chunks, each as long as one engine call over the active slots.
//
// RECOMMENDED USE
//   Recurrent models served under load with sequence lengths that differ widely (the request
//   level batcher makes a short sequence wait for the longest of its batch, and a new request
//   wait for the running batch). For models of uniform lengths, or under light load, the
//   dynamic batcher's single engine call per batch costs less (docs/batching.md).

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/engine.h"
#include "engine/step_loop.h"
#include "server/batching/batch_request.h"
#include "server/batching/cellular_chunk.h"
#include "server/batching/clock.h"
#include "server/batching/scheduler.h"

namespace rnnserve::server::batching {

struct CellularSchedulerOptions {
  std::string model_name = {};  // for error messages
  // Slots per instance: the most sequences one engine call advances. Must be positive.
  int max_active_sequences = 64;
  // The most steps one engine call advances the active slots by. Must be positive.
  int chunk_steps = 8;
  // Sequences waiting for a slot beyond which Schedule answers RESOURCE_EXHAUSTED. 0:
  // unbounded. Must be >= 0.
  int64_t max_queue_size = 0;
  // Every chunk runs chunk_steps steps, even when every active sequence has fewer left (the
  // rows' lengths mask the rest). For engines that choose their algorithms per step count (the
  // GPU's), so that a batch size always meets the same shape; otherwise a chunk runs only as
  // many steps as its longest remaining sequence.
  bool fixed_chunk_steps = false;
  // The model's time axes and recurrent state shapes. input_time_axis must be all true.
  ChunkShape shape = {};
  // Runs the model in each instance's resident step loop (engine/step_loop.h) where every
  // instance offers one for it (the GPU engine, for one LSTM or GRU layer: see
  // cellular_resident.cc) instead of chunks: sequences join and leave between single steps.
  // Elsewhere the chunks run as without it (resident() says which). In the loop, a request may
  // not give initial states and its sequences may not be longer than resident_max_steps
  // (INVALID_ARGUMENT), and each worker polls its loop on a core of its own.
  bool resident_step_loop = false;
  // The longest sequence the resident loop takes, in steps. Must be positive.
  int resident_max_steps = 512;
};

// One chunk, as the scheduler saw it. For metrics.
struct ChunkStats {
  int instance = 0;
  int64_t active = 0;      // slots the chunk advanced
  int64_t capacity = 0;    // max_active_sequences
  int64_t steps = 0;       // the chunk's steps
  int64_t real_steps = 0;  // sum of each slot's own steps in the chunk
  int64_t finished = 0;    // sequences that reached their length
  absl::Duration compute;  // the engine call
  // For each sequence that ran its first chunk here: from queued to the end of that chunk.
  std::vector<absl::Duration> first_step_latencies;
  absl::Status status;
};

using ChunkObserver = std::function<void(const ChunkStats&)>;

class CellularScheduler final : public Scheduler {
 public:
  static absl::StatusOr<std::unique_ptr<CellularScheduler>> Create(
      const CellularSchedulerOptions& options, std::vector<engine::CompiledModel*> instances,
      const Clock* clock = RealClock());
  ~CellularScheduler() override;

  CellularScheduler(const CellularScheduler&) = delete;
  CellularScheduler& operator=(const CellularScheduler&) = delete;

  // Queues *request and takes it on success; on failure it stays with the caller and `done` is
  // not called. INVALID_ARGUMENT for a request without a time axis; DEADLINE_EXCEEDED when its
  // deadline has passed; RESOURCE_EXHAUSTED when the queue is full; UNAVAILABLE after Drain().
  absl::Status Schedule(std::unique_ptr<BatchRequest>* request) override;
  // Schedule() for a feedback request (cellular_feedback.h): its rows run their given steps,
  // then the steps `feedback` gives them, one a chunk. Also INVALID_ARGUMENT for inputs of no
  // steps or with lengths; FAILED_PRECONDITION with the resident step loop (it takes whole
  // sequences; it runs only models of one recurrent layer, never a language model).
  absl::Status ScheduleFeedback(std::unique_ptr<BatchRequest>* request,
                                std::shared_ptr<StepFeedback> feedback);
  SchedulerKind kind() const override { return SchedulerKind::kCellular; }
  // Requests report their time to first step through ChunkStats, not queue waits.
  bool reports_queue_waits() const override { return false; }

  void Drain() override;
  // Called after every chunk on the worker thread; set before the first request.
  void SetObserver(ChunkObserver observer) { observer_ = std::move(observer); }
  const CellularSchedulerOptions& options() const { return options_; }
  // Sequences waiting for a slot, and in slots, now.
  int64_t queued() const;
  int64_t active() const;
  // Whether the calling thread is one of the scheduler's workers.
  bool IsWorkerThread() const override;
  // Whether the sequences run in the instances' resident step loops (resident_step_loop); else
  // why not ("" when the option is off).
  bool resident() const { return resident_note_.empty() && options_.resident_step_loop; }
  const std::string& resident_note() const { return resident_note_; }

 private:
  CellularScheduler(const CellularSchedulerOptions& options,
                    std::vector<engine::CompiledModel*> instances, const Clock* clock);
  void Work(int instance);
  absl::Status Queue(std::unique_ptr<BatchRequest>* request,
                     std::shared_ptr<StepFeedback> feedback);
  // The resident step loop (cellular_resident.cc): one per instance, or resident_note_ says
  // why none; what a request must be to run in it; the worker that feeds and drains it.
  absl::Status StartResidentLoops();
  absl::Status CheckResident(const BatchRequest& request) const;
  void WorkResident(int instance);
  // Fills free slots of `active` from the queue; moves the expired to `expired`.
  void Admit(int instance, std::vector<std::unique_ptr<Slot>>& active,
             std::vector<std::unique_ptr<Slot>>& expired) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives the slots of sequences that left back to the instance's free list.
  void Release(int instance, const Slot& slot) { slots_[instance].free.push_back(slot.index); }
  // Drops the expired, then advances the rest (one or two engine calls: Advance).
  void RunChunk(int instance, std::vector<std::unique_ptr<Slot>>& active);
  // One engine call over `active`; removes (and answers) the finished and the failed.
  void Advance(int instance, std::vector<std::unique_ptr<Slot>>& active, bool continues);

  const CellularSchedulerOptions options_;
  const std::vector<engine::CompiledModel*> instances_;
  // Per instance, used by its worker alone: the slots' states, and the slot numbers free.
  struct InstanceSlots {
    std::unique_ptr<engine::SlotStates> states;
    std::unique_ptr<engine::StepLoop> loop;  // with resident()
    std::vector<int32_t> free;
  };
  std::vector<InstanceSlots> slots_;
  const Clock* const clock_;
  ChunkObserver observer_;     // set before the first request
  std::string resident_note_;  // why the resident loop is not used; set in Create

  mutable absl::Mutex mu_;
  std::deque<std::unique_ptr<Slot>> queue_ ABSL_GUARDED_BY(mu_);
  absl::Time last_sweep_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // of queue_ (Admit)
  int64_t active_ ABSL_GUARDED_BY(mu_) = 0;  // slots in use, all instances
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace rnnserve::server::batching
