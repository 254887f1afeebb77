#pragma once

// Generation's metrics (Prometheus conventions, base units), fed by the Generator's observer
// (generator.h) when each generation ends; main.cc registers registry() with the /metrics
// exposer beside the server's own families (server/metrics/server_metrics.h).
//
//   rnnserve_generated_tokens_total{model,version}                   counter: rate() is tokens/s
//   rnnserve_generations_total{model,version}                        counter
//   rnnserve_generation_time_to_first_token_seconds{model,version}   histogram, 10 µs .. 10 s
//   rnnserve_generation_time_per_token_seconds{model,version}        histogram, 10 µs .. 10 s:
//       a generation's time after its first token over its other tokens
//
// Labels are bounded: model and version come from the repository, never from a request.

#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "server/generation/generator.h"

namespace prometheus {
class Registry;
}

namespace rnnserve::server::generation {

class GenerationMetrics {
 public:
  GenerationMetrics();
  ~GenerationMetrics();
  // Records one ended generation; any thread.
  void Record(const GenerationStats& stats);
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  // The families in the text exposition format, as a scrape sees them (for tests and logs).
  std::string ExpositionText() const;

 private:
  struct Families;
  const std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Families> families_;
};

}  // namespace rnnserve::server::generation
