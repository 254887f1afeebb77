#include "server/batching/cellular_scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/batching/abandon_watch.h"
#include "server/batching/instance_threads.h"

namespace rnnserve::server::batching {
namespace {

// The final states of the slots in `slots` that finished in this chunk and whose requests ask
// for final states, from `states` into each slot's `states` ([1, ...] rows).
absl::Status ReadFinalStates(engine::SlotStates& states, const std::vector<Slot*>& slots) {
  std::vector<Slot*> wanted;
  std::vector<int32_t> indices;
  for (Slot* s : slots) {
    if (s->remaining() == 0 && s->request->batch().final_states != nullptr) {
      wanted.push_back(s);
      indices.push_back(s->index);
    }
  }
  if (wanted.empty()) return absl::OkStatus();
  engine::StateMap rows;
  if (absl::Status st = states.Read(indices, &rows); !st.ok()) return st;
  for (size_t j = 0; j < wanted.size(); ++j) {
    for (const auto& [layer, tensors] : rows) {
      std::vector<engine::Tensor>& mine = wanted[j]->states[layer];
      mine.clear();
      for (const engine::Tensor& t : tensors) {
        engine::Shape shape = t.shape();
        shape[0] = 1;
        engine::Tensor row = engine::Tensor::Float(std::move(shape));
        CopyElements(t, static_cast<int64_t>(j) * row.num_elements(), &row, 0, row.num_elements());
        mine.push_back(std::move(row));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Expired() {
  return absl::DeadlineExceededError("deadline passed before the sequence finished");
}

// Why a sequence leaves before its end, or OK when it stays: its request failed already, its
// deadline passed, or its client cancelled.
absl::Status Leaves(const CellularRequest& r, absl::Time now) {
  if (r.failed() || now > r.deadline()) return Expired();  // a failed request keeps its answer
  if (r.cancelled()) return absl::CancelledError("the client cancelled the call");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CellularScheduler>> CellularScheduler::Create(
    const CellularSchedulerOptions& options, std::vector<engine::CompiledModel*> instances,
    const Clock* clock) {
  const std::string what = absl::StrCat("model ", options.model_name, ": cellular_batching.");
  if (options.max_active_sequences <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, "max_active_sequences must be positive; was ", options.max_active_sequences));
  }
  if (options.chunk_steps <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, "chunk_steps must be positive; was ", options.chunk_steps));
  }
  if (options.max_queue_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, "max_queue_size must be >= 0; was ", options.max_queue_size));
  }
  if (instances.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " needs at least one instance"));
  }
  const auto& axes = options.shape.input_time_axis;
  if (axes.empty() || !std::all_of(axes.begin(), axes.end(), [](bool b) { return b; })) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " every input needs a time axis ([B, T, ...])"));
  }
  if (options.resident_step_loop && options.resident_max_steps <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, "resident_max_steps must be positive; was ", options.resident_max_steps));
  }
  std::unique_ptr<CellularScheduler> s(new CellularScheduler(options, std::move(instances), clock));
  for (engine::CompiledModel* instance : s->instances_) {
    auto states =
        engine::NewSlotStates(instance, options.shape.state_rows, options.max_active_sequences);
    if (!states.ok()) {
      return absl::Status(states.status().code(),
                          absl::StrCat(what, " slot states: ", states.status().message()));
    }
    InstanceSlots slots{.states = *std::move(states)};
    for (int32_t i = options.max_active_sequences - 1; i >= 0; --i) slots.free.push_back(i);
    s->slots_.push_back(std::move(slots));
  }
  if (options.resident_step_loop) {
    if (absl::Status st = s->StartResidentLoops(); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat(what, " ", st.message()));
    }
  }
  for (size_t i = 0; i < s->instances_.size(); ++i) {
    s->workers_.emplace_back([p = s.get(), i] {
      if (p->resident()) {
        p->WorkResident(static_cast<int>(i));
      } else {
        p->Work(static_cast<int>(i));
      }
    });
  }
  return s;
}

CellularScheduler::CellularScheduler(const CellularSchedulerOptions& options,
                                     std::vector<engine::CompiledModel*> instances,
                                     const Clock* clock)
    : options_(options), instances_(std::move(instances)), clock_(clock) {}

CellularScheduler::~CellularScheduler() {
  std::deque<std::unique_ptr<Slot>> queued;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    queued.swap(queue_);
  }
  const absl::Status gone =
      absl::UnavailableError(absl::StrCat("model ", options_.model_name, " is unloading"));
  for (auto& slot : queued) slot->request->Fail(gone);
  for (std::thread& w : workers_) w.join();
}

absl::Status CellularScheduler::Schedule(std::unique_ptr<BatchRequest>* request) {
  return Queue(request, nullptr);
}

absl::Status CellularScheduler::ScheduleFeedback(std::unique_ptr<BatchRequest>* request,
                                                 std::shared_ptr<StepFeedback> feedback) {
  if (resident()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model ", options_.model_name,
                     ": the resident step loop runs whole sequences; it cannot feed steps back"));
  }
  const engine::Batch& batch = (*request)->batch;
  if (feedback == nullptr || !batch.lengths.empty() || batch.inputs.empty() ||
      batch.inputs[0].rank() < 2 || batch.inputs[0].dim(1) < 1) {
    return absl::InvalidArgumentError(
        "a feedback request needs a hook and inputs of at least one step, without lengths");
  }
  return Queue(request, std::move(feedback));
}

absl::Status CellularScheduler::Queue(std::unique_ptr<BatchRequest>* request,
                                      std::shared_ptr<StepFeedback> feedback) {
  const engine::Batch& batch = (*request)->batch;
  if (batch.inputs.empty() || batch.inputs[0].rank() < 2 || batch.inputs[0].dim(0) < 1) {
    return absl::InvalidArgumentError("a request needs at least one [B, T, ...] sequence");
  }
  const absl::Time now = clock_->Now();
  if (now > (*request)->deadline) {
    return absl::DeadlineExceededError("deadline passed before the request was queued");
  }
  const int64_t rows = batch.inputs[0].dim(0);
  if (resident()) {
    if (absl::Status st = CheckResident(**request); !st.ok()) return st;
  }
  absl::MutexLock lock(&mu_);
  if (draining_ || stopping_) {
    return absl::UnavailableError(absl::StrCat("model ", options_.model_name, " is unloading"));
  }
  if (options_.max_queue_size > 0 &&
      static_cast<int64_t>(queue_.size()) + rows > options_.max_queue_size) {
    return absl::ResourceExhaustedError(
        absl::StrCat("model ", options_.model_name, ": ", queue_.size(),
                     " sequences wait for a slot; cellular_batching.max_queue_size is ",
                     options_.max_queue_size));
  }
  auto shared = std::make_shared<CellularRequest>(std::move(*request), now, std::move(feedback));
  for (int64_t r = 0; r < rows; ++r) {
    auto slot = std::make_unique<Slot>();
    slot->request = shared;
    slot->row = r;
    slot->length = shared->length(r);
    queue_.push_back(std::move(slot));
  }
  return absl::OkStatus();
}

void CellularScheduler::Drain() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
  mu_.Await(absl::Condition(
      +[](CellularScheduler* s)
           ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) { return s->queue_.empty() && s->active_ == 0; },
      this));
}

int64_t CellularScheduler::queued() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(queue_.size());
}

int64_t CellularScheduler::active() const {
  absl::MutexLock lock(&mu_);
  return active_;
}

void CellularScheduler::Admit(int instance, std::vector<std::unique_ptr<Slot>>& active,
                              std::vector<std::unique_ptr<Slot>>& expired) {
  const absl::Time now = clock_->Now();
  std::vector<int32_t>& free = slots_[instance].free;
  while (!queue_.empty() && !free.empty()) {
    std::unique_ptr<Slot> slot = std::move(queue_.front());
    queue_.pop_front();
    if (!Leaves(*slot->request, now).ok()) {
      expired.push_back(std::move(slot));
      continue;
    }
    slot->index = free.back();
    free.pop_back();
    active.push_back(std::move(slot));
    ++active_;
  }
  // Those still waiting whose caller gave up are answered now, not when a slot frees.
  if (queue_.empty() || now - last_sweep_ < kAbandonPollInterval) return;
  last_sweep_ = now;
  std::deque<std::unique_ptr<Slot>> staying;
  for (auto& slot : queue_) {
    if (Leaves(*slot->request, now).ok()) {
      staying.push_back(std::move(slot));
    } else {
      expired.push_back(std::move(slot));
    }
  }
  queue_.swap(staying);
}

void CellularScheduler::Work(int instance) {
  std::vector<std::unique_ptr<Slot>> active;
  while (true) {
    std::vector<std::unique_ptr<Slot>> expired;
    {
      absl::MutexLock lock(&mu_);
      if (active.empty()) {
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || !queue_.empty();
        };
        clock_->AwaitWithDeadline(&mu_, absl::Condition(&ready), absl::InfiniteFuture());
      }
      if (stopping_) {
        active_ -= static_cast<int64_t>(active.size());
        break;
      }
      Admit(instance, active, expired);
    }
    for (auto& slot : expired) slot->request->Fail(Leaves(*slot->request, clock_->Now()));
    if (!active.empty()) RunChunk(instance, active);
  }
  const absl::Status gone =
      absl::UnavailableError(absl::StrCat("model ", options_.model_name, " is unloading"));
  for (auto& slot : active) slot->request->Fail(gone);
}

void CellularScheduler::RunChunk(int instance, std::vector<std::unique_ptr<Slot>>& active) {
  // Sequences whose request's deadline passed (or whose request already failed) leave first.
  const absl::Time now = clock_->Now();
  // Under Keras masking a sequence that starts from states its request gives outputs zeros on
  // masked steps before its first valid one, where a continuing sequence repeats its h: the
  // two kinds run as separate engine calls (engine::Batch::continues).
  std::vector<std::unique_ptr<Slot>> groups[2];  // [0]: continuing or from zeros; [1]: given
  int64_t left = 0;
  for (auto& slot : active) {
    if (absl::Status why = Leaves(*slot->request, now); !why.ok()) {
      slot->request->Fail(why);  // nothing when its request failed already
      Release(instance, *slot);
      ++left;
    } else {
      const engine::Batch& b = slot->request->batch();
      const bool given = !slot->started && !b.continues && !b.initial_states.empty();
      groups[given ? 1 : 0].push_back(std::move(slot));
    }
  }
  if (left > 0) {
    absl::MutexLock lock(&mu_);
    active_ -= left;
  }
  active.clear();
  for (int g = 0; g < 2; ++g) {
    if (groups[g].empty()) continue;
    Advance(instance, groups[g], /*continues=*/g == 0);
    for (auto& slot : groups[g]) active.push_back(std::move(slot));
  }
}

void CellularScheduler::Advance(int instance, std::vector<std::unique_ptr<Slot>>& active,
                                bool continues) {
  ChunkStats stats{.instance = instance,
                   .active = static_cast<int64_t>(active.size()),
                   .capacity = options_.max_active_sequences};
  engine::SlotStates& states = *slots_[instance].states;
  std::vector<Slot*> slots, fresh;
  std::vector<int32_t> indices, fresh_indices;
  std::vector<bool> first;
  for (auto& s : active) {
    slots.push_back(s.get());
    indices.push_back(s->index);
    first.push_back(!s->started);
    if (!s->started) {
      fresh.push_back(s.get());
      fresh_indices.push_back(s->index);
    }
  }
  const absl::Time started = clock_->Now();
  // New sequences' states into their slots first: their requests' initial states, or zeros.
  if (!fresh.empty()) {
    stats.status = states.Write(fresh_indices, StartStates(fresh, options_.shape));
  }
  int64_t steps = 0;
  engine::Batch batch = GatherChunk(slots, options_.shape, options_.chunk_steps,
                                    options_.fixed_chunk_steps, *instances_[instance], &steps);
  batch.continues = continues;
  for (int32_t n : batch.lengths) stats.real_steps += n;
  std::vector<engine::Tensor> outputs;
  if (stats.status.ok()) stats.status = states.Run(std::move(batch), indices, &outputs);
  const absl::Time ended = clock_->Now();
  stats.compute = ended - started;
  stats.steps = steps;
  if (stats.status.ok()) stats.status = ScatterChunk(slots, options_.shape, steps, outputs);
  // Feedback rows that ran their last step ask for one more (before their states are read).
  std::vector<absl::Status> fed(active.size());
  for (size_t j = 0; j < active.size() && stats.status.ok(); ++j) {
    Slot& s = *active[j];
    if (s.remaining() == 0 && s.request->feedback() != nullptr && !s.request->failed()) {
      fed[j] = FeedSlot(s);
    }
  }
  if (stats.status.ok()) stats.status = ReadFinalStates(states, slots);
  std::vector<std::unique_ptr<Slot>> running;
  int64_t left = 0;
  for (size_t j = 0; j < active.size(); ++j) {
    Slot& s = *active[j];
    if (!stats.status.ok() || !fed[j].ok()) {
      s.request->Fail(stats.status.ok() ? fed[j] : stats.status);
      Release(instance, s);
      ++left;
      continue;
    }
    if (first[j]) stats.first_step_latencies.push_back(ended - s.request->enqueued());
    if (s.remaining() == 0) {
      s.request->Finish(s, options_.shape);
      Release(instance, s);
      ++stats.finished;
      ++left;
    } else {
      running.push_back(std::move(active[j]));
    }
  }
  active.swap(running);
  // The observer runs before the slots are given back, so Drain() returns after it.
  if (observer_) observer_(stats);
  if (left > 0) {
    absl::MutexLock lock(&mu_);
    active_ -= left;
  }
}

bool CellularScheduler::IsWorkerThread() const { return CallingThreadIsOneOf(workers_); }

}  // namespace rnnserve::server::batching
