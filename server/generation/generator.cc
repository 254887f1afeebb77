#include "server/generation/generator.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/generation/model_step.h"
#include "server/generation/slot_feedback.h"
#include "server/servable.h"

namespace rnnserve::server::generation {

Generation::Generation(std::shared_ptr<const Servable> model, ModelKind kind,
                       std::shared_ptr<const Vocabulary> vocab, GenerateParams params,
                       absl::Time deadline, Listener listener)
    : model_(std::move(model)),
      kind_(kind),
      vocab_(std::move(vocab)),
      params_(std::move(params)),
      deadline_(deadline),
      listener_(std::move(listener)) {
  samples_.resize(params_.n);
  for (Sample& s : samples_) s.context = params_.prompt_ids;
  finished_.assign(samples_.size(), false);
}

Generation::Wait Generation::Next(StepEvent* event, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !events_.empty() || ended_; };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (!events_.empty()) {
    *event = std::move(events_.front());
    events_.pop_front();
    return Wait::kEvent;
  }
  return ended_ ? Wait::kEnd : Wait::kTimeout;
}

absl::Status Generation::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

void Generation::Push(StepEvent event) {
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    if (!event.tokens.empty() && first_token_ == absl::InfiniteFuture()) {
      first_token_ = absl::Now();
    }
    for (const Finish& f : event.finished) finished_[f.sample] = true;
    events_.push_back(std::move(event));
  }
  if (listener_) listener_();
}

void Generation::End(absl::Status status) {
  {
    absl::MutexLock lock(&mu_);
    ended_ = true;
    status_ = std::move(status);
  }
  if (listener_) listener_();
}

std::vector<int32_t> Generation::Unfinished() const {
  absl::MutexLock lock(&mu_);
  std::vector<int32_t> out;
  for (size_t i = 0; i < finished_.size(); ++i) {
    if (!finished_[i]) out.push_back(static_cast<int32_t>(i));
  }
  return out;
}

bool Generation::SampleNext(size_t i, std::span<const float> row, StepEvent* event) {
  Sample& s = samples_[i];
  const GenerateParams& p = params_;
  const int64_t id =
      ChooseToken(row, IsDistribution(row), p.sampler, UniformDraw(p.seed, i, s.draws++));
  const int32_t sample = static_cast<int32_t>(i);
  if (std::find(p.stop_ids.begin(), p.stop_ids.end(), id) != p.stop_ids.end()) {
    s.done = true;
    event->finished.push_back({sample, FinishReason::kStop, s.tokens});
    return false;
  }
  std::string text = vocab_ ? vocab_->Decode(id) : std::string();
  s.text += text;
  s.context.push_back(id);
  ++s.tokens;
  tokens_.fetch_add(1, std::memory_order_relaxed);
  event->tokens.push_back({sample, id, std::move(text)});
  const bool stopped = std::any_of(p.stop_strings.begin(), p.stop_strings.end(),
                                   [&](const std::string& x) { return absl::EndsWith(s.text, x); });
  if (stopped || s.tokens >= p.max_tokens) {
    s.done = true;
    event->finished.push_back(
        {sample, stopped ? FinishReason::kStop : FinishReason::kLength, s.tokens});
    return false;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<Generator>> Generator::Create(const GeneratorOptions& options) {
  if (options.max_active < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_active must be positive; was ", options.max_active));
  }
  if (options.limits.max_tokens < 1 || options.limits.max_samples < 1 ||
      options.limits.max_prompt_tokens < 1) {
    return absl::InvalidArgumentError("generation limits must be positive");
  }
  return std::unique_ptr<Generator>(new Generator(options));
}

Generator::~Generator() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    // Generations in slots leave them before their next chunk and end as cancelled.
    for (Generation* g : in_slots_) {
      g->shutdown_.store(true);
      g->Cancel();
    }
    auto gone = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return in_slots_.empty(); };
    mu_.Await(absl::Condition(&gone));
  }
  if (worker_.joinable()) worker_.join();
}

absl::StatusOr<std::shared_ptr<const Vocabulary>> Generator::VocabularyOf(const Servable& model) {
  const std::string path =
      (std::filesystem::path(model.source_file()).parent_path() / "vocab.json").string();
  absl::MutexLock lock(&mu_);
  auto it = vocabularies_.find(path);
  if (it != vocabularies_.end()) return it->second;
  std::shared_ptr<const Vocabulary> vocab;
  if (std::filesystem::exists(path)) {
    auto loaded = Vocabulary::Load(path);
    if (!loaded.ok()) return absl::FailedPreconditionError(loaded.status().message());
    vocab = std::make_shared<const Vocabulary>(*std::move(loaded));
  }
  vocabularies_[path] = vocab;
  return vocab;
}

absl::StatusOr<std::shared_ptr<Generation>> Generator::Start(std::shared_ptr<const Servable> model,
                                                             GenerateParams params,
                                                             absl::Time deadline,
                                                             Generation::Listener listener) {
  auto kind = DetectKind(*model);
  if (!kind.ok()) return kind.status();
  auto vocab = VocabularyOf(*model);
  if (!vocab.ok()) return vocab.status();
  if (auto s = Validate(*kind, vocab->get(), options_.limits, model->name(), &params); !s.ok()) {
    return s;
  }
  const batching::CellularScheduler* cellular = model->cellular();
  const bool in_slots =
      kind->kind == ModelKind::kStateful && cellular != nullptr && !cellular->resident();
  std::shared_ptr<Generation> g(new Generation(std::move(model), *kind, *std::move(vocab),
                                               std::move(params), deadline, std::move(listener)));
  if (in_slots) {
    if (absl::Status s = StartInSlots(g); !s.ok()) return s;
    return g;
  }
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the server is shutting down");
  if (active_count_ >= options_.max_active) {
    return absl::ResourceExhaustedError(absl::StrCat(
        options_.max_active, " generations run already (the server's bound on generations)"));
  }
  ++active_count_;
  queued_.push_back(g);
  if (!worker_.joinable()) worker_ = std::thread([this] { Loop(); });
  return g;
}

absl::Status Generator::StartInSlots(const std::shared_ptr<Generation>& g) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("the server is shutting down");
    if (active_count_ >= options_.max_active) {
      return absl::ResourceExhaustedError(absl::StrCat(
          options_.max_active, " generations run already (the server's bound on generations)"));
    }
    ++active_count_;
    in_slots_.insert(g.get());
  }
  auto request = SlotFeedback::Request(g, [this, g](absl::StatusOr<std::vector<engine::Tensor>> r) {
    FinishInSlots(*g, r.status());
  });
  absl::Status s =
      g->model_->cellular()->ScheduleFeedback(&request, std::make_shared<SlotFeedback>(g));
  if (!s.ok()) {
    absl::MutexLock lock(&mu_);
    --active_count_;
    in_slots_.erase(g.get());
  }
  return s;
}

void Generator::FinishInSlots(Generation& g, absl::Status status) {
  if (g.shutdown_.load()) {
    // As the worker ends what runs when the generator goes: the rest are cancelled.
    StepEvent last;
    for (int32_t i : g.Unfinished()) {
      last.finished.push_back(
          {.sample = i, .reason = FinishReason::kCancelled, .tokens = g.samples_[i].tokens});
    }
    g.Push(std::move(last));
    status = absl::OkStatus();
  } else if (absl::IsCancelled(status) && g.cancelled_.load()) {
    status = absl::CancelledError("the client cancelled the generation");
  } else if (absl::IsDeadlineExceeded(status)) {
    status = absl::DeadlineExceededError(
        absl::StrCat("the deadline passed after ", g.tokens_.load(), " tokens"));
  }
  Finish(g, std::move(status));
}

void Generator::Finish(Generation& g, absl::Status status) {
  {
    // The place is free before the front end hears of the end.
    absl::MutexLock lock(&mu_);
    --active_count_;
  }
  absl::Time first;
  {
    absl::MutexLock lock(&g.mu_);
    first = g.first_token_;
  }
  if (observer_) {
    observer_({.model = g.model_->name(),
               .version = g.model_->version(),
               .tokens = g.tokens_.load(),
               .time_to_first = first - g.started_,
               .total = absl::Now() - g.started_});
  }
  g.End(std::move(status));
  // Last: the destructor waits for this (and g lives while its request's `done` holds it).
  absl::MutexLock lock(&mu_);
  in_slots_.erase(&g);
}

void Generator::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto work = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queued_.empty() || !active_.empty();
      };
      mu_.Await(absl::Condition(&work));
      for (auto& g : queued_) active_.push_back(std::move(g));
      queued_.clear();
      if (stopping_) break;
    }
    // Drop: gone clients and passed deadlines leave before the next engine call.
    const absl::Time now = absl::Now();
    std::erase_if(active_, [&](const std::shared_ptr<Generation>& g) {
      if (g->cancelled_.load(std::memory_order_relaxed)) {
        Finish(*g, absl::CancelledError("the client cancelled the generation"));
        return true;
      }
      if (now > g->deadline_) {
        Finish(*g, absl::DeadlineExceededError(
                       absl::StrCat("the deadline passed after ", g->tokens_.load(), " tokens")));
        return true;
      }
      return false;
    });
    // One step per model, in the order the models first appear.
    std::vector<std::vector<std::shared_ptr<Generation>>> by_model;
    for (const auto& g : active_) {
      auto it = std::find_if(by_model.begin(), by_model.end(),
                             [&](const auto& group) { return group[0]->model_ == g->model_; });
      if (it == by_model.end()) {
        by_model.push_back({g});
      } else {
        it->push_back(g);
      }
    }
    for (const auto& group : by_model) StepModel(group);
    std::erase_if(active_, [](const std::shared_ptr<Generation>& g) {
      absl::MutexLock lock(&g->mu_);
      return g->ended_;
    });
  }
  for (auto& g : active_) {
    StepEvent last;
    for (const Generation::Sample& s : g->samples_) {
      if (!s.done) {
        last.finished.push_back({.sample = static_cast<int32_t>(&s - g->samples_.data()),
                                 .reason = FinishReason::kCancelled,
                                 .tokens = s.tokens});
      }
    }
    g->Push(std::move(last));
    Finish(*g, absl::OkStatus());
  }
  active_.clear();
}

void Generator::StepModel(const std::vector<std::shared_ptr<Generation>>& gens) {
  const Servable& model = *gens[0]->model_;
  const ModelKind& kind = gens[0]->kind_;
  // New generations of a stateful LM run their prompts first, together.
  std::vector<Generation*> prompts;
  for (const auto& g : gens) {
    if (kind.kind == ModelKind::kStateful && !g->prompt_ran_) {
      g->prompt_ran_ = true;
      prompts.push_back(g.get());
    }
  }
  std::vector<std::pair<Generation*, absl::Status>> failed;
  ModelStep::RunPrompts(prompts, &failed);
  for (auto& [g, s] : failed) Finish(*g, std::move(s));
  std::vector<Generation::Sample*> rows;
  std::vector<Generation*> stepping;
  for (const auto& g : gens) {
    if (std::any_of(failed.begin(), failed.end(),
                    [&](const auto& f) { return f.first == g.get(); })) {
      continue;
    }
    stepping.push_back(g.get());
    for (Generation::Sample& s : g->samples_) {
      if (!s.done && s.row.empty()) rows.push_back(&s);
    }
  }
  if (!rows.empty()) {
    if (auto s = ModelStep::Step(model, kind, rows); !s.ok()) {
      for (Generation* g : stepping) Finish(*g, s);
      return;
    }
  }
  for (Generation* g : stepping) SampleStep(*g);
}

void Generator::SampleStep(Generation& g) {
  StepEvent event;
  bool live = false;
  for (size_t i = 0; i < g.samples_.size(); ++i) {
    Generation::Sample& s = g.samples_[i];
    if (s.done) continue;
    live |= g.SampleNext(i, s.row, &event);
    s.row.clear();
  }
  g.Push(std::move(event));
  if (!live) Finish(g, absl::OkStatus());
}

}  // namespace rnnserve::server::generation
