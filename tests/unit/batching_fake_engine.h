#pragma once

// A deterministic CompiledModel stand-in for scheduler tests: it records every batch it gets
// and answers with outputs that show which input rows, lengths and steps it saw.
//
// Input 0 is [B, T, F] floats. Outputs:
//   0 "echo"    [B, T, 1]: x[b, t, 0] for t < length(b), else 0 (ONNX-style masking);
//   1 "summary" [B, 2]:    {length(b), sum over t < length(b) of x[b, t, 0]}.
// length(b) is batch.lengths[b], or T when the batch has no lengths. A layer "rnn" has one
// state h [B, 1]: it starts at initial_states["rnn"][0] (zeros when not given) and ends at
// h0 + the summary's sum, which Run stores in *final_states when that is set.

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "engine/engine.h"

namespace rnnserve::testing {

struct SeenBatch {
  engine::Shape input_shape;       // of input 0
  std::vector<int32_t> lengths;    // as given
  std::vector<float> first_steps;  // x[b, 0, 0] for each row: identifies the rows
};

class FakeEngine final : public engine::CompiledModel {
 public:
  ~FakeEngine() override {
    if (destroyed_ != nullptr) destroyed_->Notify();
  }
  absl::Status Run(const engine::Batch& batch, std::vector<engine::Tensor>* outputs) override;
  std::string engine_name() const override { return "fake"; }
  std::vector<engine::LayerPlacement> placements() const override { return {}; }
  int64_t memory_bytes() const override { return 0; }

  std::vector<SeenBatch> seen() const;
  int calls() const;

  // Run() fails any batch holding a row whose x[b, 0, 0] is negative (a "bad request").
  void FailOnNegative() { fail_on_negative_ = true; }
  // Run() answers with one row too few in every output (a broken engine).
  void DropARow() { drop_a_row_ = true; }
  // The next `n` calls of Run() fail with INTERNAL, as a CUDA fault would (-1: every call).
  void FailInternal(int n) {
    absl::MutexLock lock(&mu_);
    internal_failures_ = n;
  }
  // Run() takes at least `d` (a slow engine), from the next call on.
  void Delay(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    delay_ = d;
  }
  // Run() blocks, after recording its batch, until Open() is called. While it waits it asks
  // the batch's stop every millisecond, as an engine asks between steps, and returns CANCELLED
  // when that says stop (counted by stopped()).
  void Gate() { gated_ = true; }
  int stopped() const;
  // Blocks until Run() has returned `n` times after the batch's stop said so.
  void AwaitStopped(int n) const;
  void Open() { gate_.Notify(); }
  // Notifies `n` when the engine is destroyed (with the servable that owns it).
  void NotifyOnDestruction(absl::Notification* n) { destroyed_ = n; }
  // Blocks until Run() has been entered `n` times.
  void AwaitCalls(int n) const;

 private:
  mutable absl::Mutex mu_;
  std::vector<SeenBatch> seen_ ABSL_GUARDED_BY(mu_);
  int internal_failures_ ABSL_GUARDED_BY(mu_) = 0;
  int stopped_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration delay_ ABSL_GUARDED_BY(mu_);
  bool fail_on_negative_ = false;  // set before use
  bool gated_ = false;             // set before use
  bool drop_a_row_ = false;        // set before use
  absl::Notification gate_;
  absl::Notification* destroyed_ = nullptr;  // set before use
};

// An engine whose every compiled instance is a FakeEngine: the engine seam of server tests
// (server::ServableOptions::engine_factory), so they need no model file and no real kernels.
// It keeps a pointer to each instance, in compile order, for the test to steer and inspect;
// the servable owns the instances.
class FakeEngineFactory {
 public:
  // `setup` runs on each new instance before the servable sees it (e.g. DropARow).
  explicit FakeEngineFactory(std::function<void(FakeEngine&)> setup = nullptr)
      : setup_(std::move(setup)) {}

  // For ServableOptions::engine_factory; `this` must outlive the servable's load.
  std::function<absl::StatusOr<std::unique_ptr<engine::Engine>>(const engine::EngineOptions&)>
  Factory();

  int instances() const;
  FakeEngine& instance(int i) const;
  // The options instance i was compiled with.
  engine::CompileOptions options(int i) const;

  // The model FakeEngine computes: input "x" FP32 [-1, -1, 2]; outputs "echo" and "summary".
  static engine::Model Model();

 private:
  class Engine;
  const std::function<void(FakeEngine&)> setup_;
  mutable absl::Mutex mu_;
  std::vector<FakeEngine*> instances_ ABSL_GUARDED_BY(mu_);
  std::vector<engine::CompileOptions> options_ ABSL_GUARDED_BY(mu_);  // [instances]
};

}  // namespace rnnserve::testing
