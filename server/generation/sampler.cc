#include "server/generation/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace rnnserve::server::generation {
namespace {

// splitmix64's finaliser: a bijection of 64-bit words that mixes every input bit.
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

double UniformDraw(uint64_t seed, uint64_t sample, uint64_t step) {
  const uint64_t h = Mix(Mix(Mix(seed) ^ sample) ^ (step * 0xD1B54A32D192ED03ull));
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

bool IsDistribution(std::span<const float> row) {
  double sum = 0;
  for (float p : row) {
    if (!(p >= 0.0f && p <= 1.0f)) return false;
    sum += p;
  }
  return std::abs(sum - 1.0) <= 1e-3;
}

int64_t ChooseToken(std::span<const float> row, bool probabilities, const SamplerOptions& options,
                    double u) {
  const int64_t v = static_cast<int64_t>(row.size());
  if (options.temperature <= 0) {
    // np.argmax's rule: the first of the largest.
    return std::max_element(row.begin(), row.end()) - row.begin();
  }
  // Scaled logits, in float64.
  std::vector<double> logit(v);
  for (int64_t i = 0; i < v; ++i) {
    const double x = probabilities ? std::log(static_cast<double>(row[i])) : row[i];
    logit[i] = x / options.temperature;
  }
  // Tokens by probability, most probable first, the lower id first on a tie.
  std::vector<int64_t> order(v);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return logit[a] > logit[b]; });
  const double top = logit[order[0]];
  std::vector<double> weight(v);
  double total = 0;
  for (int64_t r = 0; r < v; ++r) {
    const double l = logit[order[r]];
    weight[r] = std::isfinite(l) ? std::exp(l - top) : 0.0;
    total += weight[r];
  }
  int64_t keep = v;
  if (options.top_k > 0) keep = std::min<int64_t>(keep, options.top_k);
  if (options.top_p > 0 && options.top_p < 1) {
    double mass = 0;
    for (int64_t r = 0; r < keep; ++r) {
      mass += weight[r] / total;
      if (mass >= options.top_p) {
        keep = r + 1;
        break;
      }
    }
  }
  double kept = 0;
  for (int64_t r = 0; r < keep; ++r) kept += weight[r];
  // Walk the kept tokens in probability order to the draw.
  const double target = u * kept;
  double cumulative = 0;
  for (int64_t r = 0; r < keep; ++r) {
    cumulative += weight[r];
    if (target < cumulative) return order[r];
  }
  // Rounding: the draw lies past the last cumulative sum.
  for (int64_t r = keep - 1; r >= 0; --r) {
    if (weight[r] > 0) return order[r];
  }
  return order[0];
}

}  // namespace rnnserve::server::generation
