// The parts of a generated token's cost at concurrency 1, for bench/generation_bench.py:
//
//   generation_floor step MODEL_DIR [--tokens N]
//     Loads MODEL_DIR (its config.pbtxt, as the server does) and prints one JSON line:
//     - engine_step_us: the engine's single step of the model, as a generation's token runs
//       it: ids [1, 1] from the states after the prompt, continuing, final states out
//       (Servable::RunOn on instance 0: no scheduler, no thread hop); median of N;
//     - loop_token_us / slots_token_us: the server's token loop without gRPC, per token: one
//       greedy generation of N tokens through generation::Generator (its worker with the
//       model as configured; in the step-level scheduler's slots with cellular_batching
//       added), its events left queued (the service's reactor is called on the thread that
//       stepped the generation: no thread wakes per token); median of 5.
//   generation_floor serve --port P
//     Serves rnnserve.v1 Generate with no model behind it: each call streams max_tokens
//     messages of one token each (id 1, text "a"), each written when the previous one is done,
//     on the callback API as the server's Generate is. A client times it to learn what one
//     message of the stream costs it on this machine.

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "rnnserve/v1/rnnserve.grpc.pb.h"
#include "server/generation/generator.h"
#include "server/model_config.h"
#include "server/servable.h"

namespace rnnserve {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

engine::Tensor Ids(engine::DType dtype, int64_t t, const std::vector<int64_t>& ids) {
  if (dtype == engine::DType::kInt64) return engine::Tensor::Int64({1, t}, ids);
  return engine::Tensor::Float({1, t}, std::vector<float>(ids.begin(), ids.end()));
}

absl::StatusOr<std::shared_ptr<const server::Servable>> Load(const std::string& dir,
                                                             bool cellular) {
  auto config = server::ReadModelConfig(dir);
  if (!config.ok()) return config.status();
  if (cellular) config->mutable_cellular_batching()->set_max_active_sequences(8);
  auto servable = server::Servable::Load(dir, 1, *config);
  if (!servable.ok()) return servable.status();
  return server::ShareServable(*std::move(servable));
}

// Microseconds a token of one greedy generation of `tokens` costs, through the generator, whose
// observer notifies *ended when a generation ends.
absl::StatusOr<double> TokenLoop(server::generation::Generator& generator,
                                 std::atomic<absl::Notification*>& ended,
                                 const std::shared_ptr<const server::Servable>& model,
                                 const std::vector<int64_t>& prompt, int tokens) {
  server::generation::GenerateParams p;
  p.prompt_ids = prompt;
  p.max_tokens = tokens;
  absl::Notification done;
  ended.store(&done);
  const auto start = std::chrono::steady_clock::now();
  auto g = generator.Start(model, p, absl::InfiniteFuture());
  if (!g.ok()) return g.status();
  done.WaitForNotification();
  const auto end = std::chrono::steady_clock::now();
  server::generation::StepEvent event;
  int got = 0;
  while ((*g)->Next(&event, absl::Seconds(60)) == server::generation::Generation::Wait::kEvent) {
    got += static_cast<int>(event.tokens.size());
  }
  if (!(*g)->status().ok()) return (*g)->status();
  if (got != tokens) return absl::InternalError("the generation ended early");
  return std::chrono::duration<double, std::micro>(end - start).count() / tokens;
}

int Step(const std::string& dir, int tokens) {
  auto plain = Load(dir, false);
  auto slots = Load(dir, true);
  if (!plain.ok() || !slots.ok()) {
    std::cerr << (plain.ok() ? slots.status() : plain.status()) << "\n";
    return 1;
  }
  const server::Servable& model = **plain;
  const engine::DType dtype = model.inputs()[0].dtype;
  const std::vector<int64_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  engine::Batch first;
  first.inputs.push_back(Ids(dtype, 10, prompt));
  engine::StateMap states;
  first.final_states = &states;
  std::vector<engine::Tensor> out;
  if (auto s = model.RunOn(0, first, &out); !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  std::vector<double> step_us;
  for (int i = 0; i < tokens + 200; ++i) {  // the first 200: warm-up
    engine::Batch step;
    step.inputs.push_back(Ids(dtype, 1, {1 + i % 7}));
    step.initial_states = states;
    step.continues = true;
    engine::StateMap next;
    step.final_states = &next;
    const auto start = std::chrono::steady_clock::now();
    if (auto s = model.RunOn(0, step, &out); !s.ok()) {
      std::cerr << s << "\n";
      return 1;
    }
    const auto end = std::chrono::steady_clock::now();
    if (i >= 200) step_us.push_back(std::chrono::duration<double, std::micro>(end - start).count());
    states = std::move(next);
  }
  auto generator = server::generation::Generator::Create({});
  std::atomic<absl::Notification*> ended{nullptr};
  (*generator)->SetObserver([&ended](const server::generation::GenerationStats&) {
    ended.load()->Notify();
  });
  std::vector<double> loop_us, slots_us;
  for (int round = 0; round < 6; ++round) {  // the first: warm-up
    auto a = TokenLoop(**generator, ended, *plain, prompt, tokens);
    auto b = TokenLoop(**generator, ended, *slots, prompt, tokens);
    if (!a.ok() || !b.ok()) {
      std::cerr << (a.ok() ? b.status() : a.status()) << "\n";
      return 1;
    }
    if (round == 0) continue;
    loop_us.push_back(*a);
    slots_us.push_back(*b);
  }
  std::printf(
      "{\"engine_step_us\": %.2f, \"loop_token_us\": %.2f, \"slots_token_us\": %.2f, "
      "\"steps\": %d}\n",
      Median(step_us), Median(loop_us), Median(slots_us), tokens);
  return 0;
}

// Streams max_tokens one-token messages, each after the previous one is written.
class MessagesOnly final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  explicit MessagesOnly(int64_t messages) : left_(messages) {
    response_.mutable_model_spec()->set_name("floor");
    v1::GeneratedToken* t = response_.add_tokens();
    t->set_id(1);
    t->set_text("a");
    Next();
  }
  void OnWriteDone(bool ok) override {
    if (!ok) return Finish(grpc::Status(grpc::StatusCode::CANCELLED, "gone"));
    Next();
  }
  void OnDone() override { delete this; }

 private:
  void Next() {
    if (left_-- > 0) return StartWrite(&response_);
    Finish(grpc::Status::OK);
  }
  int64_t left_;
  v1::GenerateResponse response_;
};

class FloorService final : public v1::RnnServe::WithCallbackMethod_Generate<v1::RnnServe::Service> {
 public:
  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext*, const v1::GenerateRequest* request) override {
    return new MessagesOnly(request->max_tokens());
  }
};

int Serve(int port) {
  FloorService service;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) return 1;
  std::cout << "listening " << port << std::endl;
  server->Wait();
  return 0;
}

}  // namespace
}  // namespace rnnserve

int main(int argc, char** argv) {
  CLI::App app("The parts of a generated token's cost (bench/generation_bench.py)");
  app.require_subcommand(1);
  std::string dir;
  int tokens = 2000, port = 0;
  CLI::App* step = app.add_subcommand("step", "time the engine's step and the token loop");
  step->add_option("MODEL_DIR", dir)->required();
  step->add_option("--tokens", tokens)->check(CLI::Range(1, 4096));
  CLI::App* serve = app.add_subcommand("serve", "serve Generate with no model");
  serve->add_option("--port", port)->required();
  CLI11_PARSE(app, argc, argv);
  if (step->parsed()) return rnnserve::Step(dir, tokens);
  return rnnserve::Serve(port);
}
