#include "server/generation/request.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace rnnserve::server::generation {

absl::Status Validate(const ModelKind& kind, const Vocabulary* vocab, const RequestLimits& limits,
                      const std::string& model_name, GenerateParams* p) {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (p->prompt_text.has_value() && !p->prompt_ids.empty()) {
    return bad("give the prompt as prompt_ids or as prompt_text, not both");
  }
  if (p->prompt_text.has_value()) {
    if (vocab == nullptr) {
      return bad("prompt_text needs a vocabulary: model ", model_name,
                 " has no vocab.json beside its file; send prompt_ids");
    }
    auto ids = vocab->Encode(*p->prompt_text);
    if (!ids.ok()) return ids.status();
    p->prompt_ids = *std::move(ids);
  }
  if (p->prompt_ids.empty()) return bad("the prompt is empty: expected at least one token");
  if (static_cast<int64_t>(p->prompt_ids.size()) > limits.max_prompt_tokens) {
    return bad("the prompt has ", p->prompt_ids.size(), " tokens; at most ",
               limits.max_prompt_tokens, " are taken");
  }
  for (size_t i = 0; i < p->prompt_ids.size(); ++i) {
    const int64_t id = p->prompt_ids[i];
    if (id < 0 || id >= kind.vocab_size) {
      return bad("prompt_ids[", i, "] is ", id, "; expected an id in [0, ", kind.vocab_size,
                 ") (model ", model_name, "'s vocabulary)");
    }
  }
  if (kind.kind == ModelKind::kWindow && static_cast<int64_t>(p->prompt_ids.size()) > kind.window) {
    return bad("the prompt has ", p->prompt_ids.size(), " tokens; model ", model_name,
               " reads a window of ", kind.window, " tokens: expected at most ", kind.window);
  }
  if (p->max_tokens < 1 || p->max_tokens > limits.max_tokens) {
    return bad("max_tokens is ", p->max_tokens, "; expected 1 to ", limits.max_tokens);
  }
  if (p->n == 0) p->n = 1;
  if (p->n < 1 || p->n > limits.max_samples) {
    return bad("n is ", p->n, "; expected 1 to ", limits.max_samples, " samples");
  }
  if (!std::isfinite(p->sampler.temperature) || p->sampler.temperature < 0) {
    return bad("temperature is ", p->sampler.temperature, "; expected 0 (greedy) or more");
  }
  if (p->sampler.top_k < 0) return bad("top_k is ", p->sampler.top_k, "; expected 0 or more");
  if (!std::isfinite(p->sampler.top_p) || p->sampler.top_p < 0) {
    return bad("top_p is ", p->sampler.top_p, "; expected 0 (off) to 1");
  }
  for (size_t i = 0; i < p->stop_ids.size(); ++i) {
    if (p->stop_ids[i] < 0 || p->stop_ids[i] >= kind.vocab_size) {
      return bad("stop_ids[", i, "] is ", p->stop_ids[i], "; expected an id in [0, ",
                 kind.vocab_size, ")");
    }
  }
  for (size_t i = 0; i < p->stop_strings.size(); ++i) {
    if (p->stop_strings[i].empty()) return bad("stop_strings[", i, "] is empty");
  }
  return absl::OkStatus();
}

}  // namespace rnnserve::server::generation
