#pragma once

// Helpers shared by the CPU engine's conformance tests: load a case made by
// models/scripts/make_cpu_fixtures.py and turn its arrays into IR weights and tensors.

#include <map>
#include <string>
#include <vector>

#include "client/npy.h"
#include "engine/ir.h"
#include "engine/tensor.h"
#include "gtest/gtest.h"
#include "tests/support/fixtures.h"

namespace rnnserve::cpu_test {

using Case = std::map<std::string, client::NpyArray>;

inline Case LoadCase(const std::string& name) {
  auto c = client::ReadNpz(testing::SourcePath("tests/fixtures/cpu/" + name + ".npz"));
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : Case{};
}

inline std::vector<float> Floats(const client::NpyArray& a) {
  return std::vector<float>(a.values.begin(), a.values.end());
}

inline std::vector<float> Floats(const Case& c, const std::string& key) {
  auto it = c.find(key);
  return it == c.end() ? std::vector<float>{} : Floats(it->second);
}

// Entry `i` of the leading axis of `a` ([N, ...] -> [...]).
inline client::NpyArray Slice(const client::NpyArray& a, int64_t i) {
  client::NpyArray out{a.descr, std::vector<int64_t>(a.shape.begin() + 1, a.shape.end()), {}};
  const int64_t n = engine::NumElements(out.shape);
  out.values.assign(a.values.begin() + i * n, a.values.begin() + (i + 1) * n);
  return out;
}

// Direction d's weights (W{d}, R{d}, bW{d}, bR{d}, P{d}, peep{d}) in the canonical layout.
inline engine::RecurrentDirection Direction(const Case& c, int d) {
  engine::RecurrentDirection dir;
  const std::string s = std::to_string(d);
  dir.W = Floats(c, "W" + s);
  dir.R = Floats(c, "R" + s);
  dir.bW = Floats(c, "bW" + s);
  dir.bR = Floats(c, "bR" + s);
  dir.P = Floats(c, "P" + s);
  dir.peephole = Floats(c, "peep" + s);
  return dir;
}

inline std::vector<int32_t> Lengths(const Case& c) {
  std::vector<int32_t> out;
  for (double v : c.at("lengths").values) out.push_back(static_cast<int32_t>(v));
  return out;
}

}  // namespace rnnserve::cpu_test
