// rnnserve-cli generate: rnnserve.v1 Generate, the text written to stdout as each token comes.

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cli_commands.h"
#include "client/cli_common.h"

namespace rnnserve::client {
namespace {

struct GenerateFlags {
  ClientOptions connection;
  std::string model;
  int64_t version = 0;
  std::string prompt;
  std::vector<int64_t> prompt_ids;
  int32_t max_tokens = 100;
  float temperature = 0;
  int32_t top_k = 0;
  float top_p = 0;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  int32_t n = 1;
  bool ids = false;
  bool json = false;
};

const char* ReasonName(v1::FinishReason r) {
  switch (r) {
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_STOP:
      return "stop";
    case v1::FINISH_REASON_CANCELLED:
      return "cancelled";
    default:
      return "unspecified";
  }
}

int Generate(const GenerateFlags& f) {
  if (f.prompt.empty() == f.prompt_ids.empty()) {
    return Fail(absl::InvalidArgumentError("give --prompt TEXT or --prompt-ids 1,2,3 (one)"));
  }
  v1::GenerateRequest req;
  req.mutable_model_spec()->set_name(f.model);
  req.mutable_model_spec()->set_version(f.version);
  if (!f.prompt.empty()) req.set_prompt_text(f.prompt);
  for (int64_t id : f.prompt_ids) req.add_prompt_ids(id);
  req.set_max_tokens(f.max_tokens);
  req.set_temperature(f.temperature);
  req.set_top_k(f.top_k);
  req.set_top_p(f.top_p);
  req.set_seed(f.seed);
  for (const std::string& s : f.stop) req.add_stop_strings(s);
  req.set_n(f.n);
  RnnServeClient client(f.connection);
  nlohmann::json out = nlohmann::json::array();
  std::vector<std::string> finishes;
  const absl::Status s = client.Generate(req, [&](const v1::GenerateResponse& step) {
    for (const v1::GeneratedToken& t : step.tokens()) {
      if (f.json) {
        out.push_back({{"sample", t.sample()}, {"id", t.id()}, {"text", t.text()}});
      } else if (f.n > 1 || f.ids || t.text().empty()) {
        std::printf("[%d] %lld %s\n", t.sample(), static_cast<long long>(t.id()), t.text().c_str());
      } else {
        std::fputs(t.text().c_str(), stdout);
        std::fflush(stdout);
      }
    }
    for (const v1::GenerateFinish& x : step.finished()) {
      if (f.json) {
        out.push_back(
            {{"sample", x.sample()}, {"finish", ReasonName(x.reason())}, {"tokens", x.tokens()}});
      } else {
        finishes.push_back(absl::StrCat("sample ", x.sample(), ": ", ReasonName(x.reason()),
                                        " after ", x.tokens(), " tokens"));
      }
    }
    return true;
  });
  if (f.json) {
    std::printf("%s\n", out.dump(1).c_str());
  } else {
    std::printf("\n");
    for (const std::string& line : finishes) std::fprintf(stderr, "%s\n", line.c_str());
  }
  return s.ok() ? 0 : Fail(s);
}

}  // namespace

Command AddGenerateCommand(CLI::App& app) {
  auto f = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Generate: a recurrent language model writes text, streamed to the terminal token by "
      "token");
  AddConnectionFlags(cmd, &f->connection);
  cmd->add_option("--model", f->model, "the model's name")->required();
  cmd->add_option("--version", f->version, "0: the newest")->capture_default_str();
  cmd->add_option("--prompt", f->prompt, "the prompt as text (the model's vocab.json encodes it)");
  cmd->add_option("--prompt-ids", f->prompt_ids, "the prompt as token ids, e.g. 4,17,9")
      ->delimiter(',');
  cmd->add_option("--max-tokens", f->max_tokens, "tokens to generate per sample")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--temperature", f->temperature, "0: greedy; > 0: sampling")
      ->capture_default_str();
  cmd->add_option("--top-k", f->top_k, "sample among the k most probable tokens; 0: all")
      ->capture_default_str();
  cmd->add_option("--top-p", f->top_p, "sample among the most probable tokens holding this mass")
      ->capture_default_str();
  cmd->add_option("--seed", f->seed, "the same seed gives the same text")->capture_default_str();
  cmd->add_option("--stop", f->stop, "stop a sample when its text ends with this (repeatable)");
  cmd->add_option("--n", f->n, "independent samples")->capture_default_str();
  cmd->add_flag("--ids", f->ids, "print each token's id beside its text, a line each");
  cmd->add_flag("--json", f->json, "print the tokens and finishes as JSON when done");
  return {cmd, [f] { return Generate(*f); }};
}

}  // namespace rnnserve::client
