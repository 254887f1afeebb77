#pragma once

// Choosing the next token from a model's output row: greedy, or seeded sampling with
// temperature, top-k and top-p.
//
// Deterministic by construction: the uniform number a draw uses comes from a counter-based
// generator (splitmix64's finaliser over seed, sample index and step), computed on the host from
// the output row. The same request gives the same tokens on every engine and at every batch
// size, as long as the engines' outputs agree (a draw changes only when two engines' rows fall
// on opposite sides of a cumulative boundary).

#include <cstdint>
#include <span>

namespace rnnserve::server::generation {

struct SamplerOptions {
  // 0: greedy (the most probable token; the lowest id on a tie). > 0: softmax(logits / T).
  double temperature = 0;
  // > 0: only the k most probable tokens; 0: all.
  int top_k = 0;
  // In (0, 1): the smallest set of most probable tokens holding at least this probability;
  // 0 or 1 (or more): all.
  double top_p = 0;
};

// A uniform number in [0, 1) for sample `sample` at step `step` of a request seeded `seed`.
double UniformDraw(uint64_t seed, uint64_t sample, uint64_t step);

// Whether `row` is a probability distribution (every value in [0, 1], summing to 1 within
// 1e-3): a softmax output, whose logits are log(row).
bool IsDistribution(std::span<const float> row);

// The token chosen from `row` (probabilities when `probabilities`, else logits; size V > 0)
// with the uniform draw `u` (UniformDraw; unused when greedy).
int64_t ChooseToken(std::span<const float> row, bool probabilities, const SamplerOptions& options,
                    double u);

}  // namespace rnnserve::server::generation
