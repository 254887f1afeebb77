#include "tests/unit/batching_fake_engine.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace rnnserve::testing {

absl::Status FakeEngine::Run(const engine::Batch& batch, std::vector<engine::Tensor>* outputs) {
  const engine::Tensor& x = batch.inputs.at(0);  // [B, T, F]
  const int64_t B = x.dim(0), T = x.dim(1), F = x.dim(2);
  SeenBatch seen{x.shape(), batch.lengths, {}};
  bool bad = false;
  for (int64_t b = 0; b < B; ++b) {
    seen.first_steps.push_back(x.f32()[b * T * F]);
    bad |= fail_on_negative_ && x.f32()[b * T * F] < 0;
  }
  bool fault = false;
  absl::Duration delay;
  {
    absl::MutexLock lock(&mu_);
    seen_.push_back(std::move(seen));
    fault = internal_failures_ != 0;
    if (internal_failures_ > 0) --internal_failures_;
    delay = delay_;
  }
  if (delay > absl::ZeroDuration()) absl::SleepFor(delay);
  if (fault) return absl::InternalError("fake engine: device fault");
  if (gated_) {
    while (!gate_.WaitForNotificationWithTimeout(absl::Milliseconds(1))) {
      if (batch.stop && batch.stop()) {
        absl::MutexLock lock(&mu_);
        ++stopped_;
        return absl::CancelledError("fake engine: stopped (Batch::stop)");
      }
    }
  }
  if (bad) return absl::InvalidArgumentError("fake engine: negative first step");
  engine::Tensor echo = engine::Tensor::Float({B, T, 1});  // [B, T, 1]
  engine::Tensor summary = engine::Tensor::Float({B, 2});  // [B, 2]: length, sum
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = batch.lengths.empty() ? T : batch.lengths[b];
    float sum = 0;
    for (int64_t t = 0; t < len; ++t) {
      echo.f32()[b * T + t] = x.f32()[(b * T + t) * F];
      sum += x.f32()[(b * T + t) * F];
    }
    summary.f32()[b * 2] = static_cast<float>(len);
    summary.f32()[b * 2 + 1] = sum;
  }
  if (drop_a_row_) {
    echo = engine::Tensor::Float({B - 1, T, 1});
    summary = engine::Tensor::Float({B - 1, 2});
  }
  if (batch.final_states != nullptr) {
    engine::Tensor h = engine::Tensor::Float({B, 1});  // [B, 1]
    const auto it = batch.initial_states.find("rnn");
    for (int64_t b = 0; b < B; ++b) {
      const float h0 = it == batch.initial_states.end() ? 0.0f : it->second.at(0).f32()[b];
      h.f32()[b] = h0 + summary.f32()[b * 2 + 1];
    }
    batch.final_states->clear();
    (*batch.final_states)["rnn"].push_back(std::move(h));
  }
  outputs->clear();
  outputs->push_back(std::move(echo));
  outputs->push_back(std::move(summary));
  return absl::OkStatus();
}

std::vector<SeenBatch> FakeEngine::seen() const {
  absl::MutexLock lock(&mu_);
  return seen_;
}

int FakeEngine::stopped() const {
  absl::MutexLock lock(&mu_);
  return stopped_;
}

int FakeEngine::calls() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(seen_.size());
}

void FakeEngine::AwaitStopped(int n) const {
  struct Enough {
    const int* stopped;
    int n;
    bool operator()() const { return *stopped >= n; }
  };
  absl::MutexLock lock(&mu_);
  const Enough enough{&stopped_, n};
  mu_.Await(absl::Condition(&enough));
}

void FakeEngine::AwaitCalls(int n) const {
  struct Enough {
    const std::vector<SeenBatch>* seen;
    int n;
    bool operator()() const { return static_cast<int>(seen->size()) >= n; }
  };
  absl::MutexLock lock(&mu_);
  const Enough enough{&seen_, n};
  mu_.Await(absl::Condition(&enough));
}

class FakeEngineFactory::Engine final : public engine::Engine {
 public:
  explicit Engine(FakeEngineFactory* owner) : owner_(owner) {}
  absl::StatusOr<std::unique_ptr<engine::CompiledModel>> Compile(
      const engine::Model&, const engine::CompileOptions& options) const override {
    auto instance = std::make_unique<FakeEngine>();
    if (owner_->setup_) owner_->setup_(*instance);
    absl::MutexLock lock(&owner_->mu_);
    owner_->instances_.push_back(instance.get());
    owner_->options_.push_back(options);
    return instance;
  }
  std::string name() const override { return "fake"; }

 private:
  FakeEngineFactory* const owner_;
};

std::function<absl::StatusOr<std::unique_ptr<engine::Engine>>(const engine::EngineOptions&)>
FakeEngineFactory::Factory() {
  return [this](const engine::EngineOptions&) -> absl::StatusOr<std::unique_ptr<engine::Engine>> {
    return std::make_unique<Engine>(this);
  };
}

int FakeEngineFactory::instances() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(instances_.size());
}

engine::CompileOptions FakeEngineFactory::options(int i) const {
  absl::MutexLock lock(&mu_);
  return options_.at(static_cast<size_t>(i));
}

FakeEngine& FakeEngineFactory::instance(int i) const {
  absl::MutexLock lock(&mu_);
  return *instances_.at(static_cast<size_t>(i));
}

engine::Model FakeEngineFactory::Model() {
  engine::Model model;
  model.name = "fake";
  model.source_format = "onnx";
  model.inputs = {{.name = "x", .dtype = engine::DType::kFloat32, .shape = {-1, -1, 2}}};
  model.outputs = {{.name = "echo", .dtype = engine::DType::kFloat32, .shape = {-1, -1, 1}},
                   {.name = "summary", .dtype = engine::DType::kFloat32, .shape = {-1, 2}}};
  model.output_values = {1, 2};
  model.num_values = 3;
  return model;
}

}  // namespace rnnserve::testing
