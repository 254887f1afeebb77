#pragma once

// A generation request and its answers, protocol-neutral: the rnnserve.v1 front end
// (server/services/generate_service.cc) decodes GenerateRequest into a GenerateParams and
// encodes each StepEvent as a GenerateResponse.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/generation/model_kind.h"
#include "server/generation/sampler.h"
#include "server/generation/vocabulary.h"

namespace rnnserve::server::generation {

// What a request asks for, as given (Validate checks it).
struct GenerateParams {
  std::vector<int64_t> prompt_ids;
  std::optional<std::string> prompt_text;  // set: encoded with the model's vocabulary
  int64_t max_tokens = 0;
  SamplerOptions sampler;
  uint64_t seed = 0;
  std::vector<int64_t> stop_ids;
  std::vector<std::string> stop_strings;
  int64_t n = 1;  // samples; 0 means 1
};

// The process's bounds on a request (GeneratorOptions holds them).
struct RequestLimits {
  int64_t max_tokens = 4096;
  int64_t max_samples = 64;
  int64_t max_prompt_tokens = 65536;
};

// Checks `params` against the model and the limits and resolves the prompt to ids
// (INVALID_ARGUMENT naming the field and what was expected). `vocab` may be null (no vocab.json
// beside the model): then prompt_text is refused.
absl::Status Validate(const ModelKind& kind, const Vocabulary* vocab, const RequestLimits& limits,
                      const std::string& model_name, GenerateParams* params);

enum class FinishReason { kLength, kStop, kCancelled };

struct Token {
  int32_t sample = 0;
  int64_t id = 0;
  std::string text;
};

struct Finish {
  int32_t sample = 0;
  FinishReason reason = FinishReason::kLength;
  int32_t tokens = 0;
};

// What one step of the model produced for one request.
struct StepEvent {
  std::vector<Token> tokens;
  std::vector<Finish> finished;
};

}  // namespace rnnserve::server::generation
