#pragma once

// Per-caller shares of one bounded resource (bytes in flight, a model's concurrency, open
// streams), so that a heavy caller is refused before a light one. The caller is
// limits::ShareKey of its identity (caller_identity.h): its token's hash, else its address.
//
// POLICY. A bound of `capacity` units has a `floor` (fair_floor_percent of the capacity, at
// least 1 unit). With `active` the callers that hold part of the bound, the asking one
// included, a caller that holds `held` may take `amount` more when all of these hold:
//   1. total + amount <= capacity                       (the bound itself)
//   2. held + amount <= max(floor, capacity / active)   (its fair share)
//   3. held == 0, or held + amount <= floor, or
//      total + amount <= capacity - floor               (the newcomers' reserve)
// So a lone caller may use all but the last `floor` units, which stay free for a caller that
// holds less than its floor (a new, light caller is not refused because a heavy one came
// first), and once several callers hold some, none may hold more than its equal part. With
// floor == capacity (fair_floor_percent 100) every rule but the bound is void: first come,
// first served. A refusal is at once (RESOURCE_EXHAUSTED by the owner, naming its flag); no
// one waits.
//
// ShareLedger is the bookkeeping only: not thread-safe, its owner locks.

#include <cstdint>
#include <map>
#include <string>

namespace rnnserve::server::limits {

enum class ShareVerdict {
  kGranted,
  kBoundFull,  // rule 1
  kOverShare,  // rule 2
  kReserved,   // rule 3
};

// The floor of a bound: `percent` (0..100) of `capacity`, at least 1, at most capacity.
int64_t ShareFloor(int64_t capacity, int percent);
// A caller's share when `active` callers (>= 1) hold part of the bound.
int64_t FairShareOf(int64_t capacity, int64_t floor, int64_t active);

struct ShareAsk {
  int64_t capacity = 0;
  int64_t floor = 0;
  int64_t total = 0;   // held by every caller
  int64_t held = 0;    // held by the asking caller
  int64_t active = 1;  // callers holding some, the asking one counted
  int64_t amount = 0;  // asked for, >= 0
};
ShareVerdict CheckShare(const ShareAsk& ask);
// Why, in words, for a refusal message ("" when granted).
std::string ExplainShare(const ShareAsk& ask, ShareVerdict verdict);

class ShareLedger {
 public:
  // Records `amount` for `caller` when CheckShare grants it; returns the verdict.
  // `ask` (optional) receives what was checked, for the refusal's message.
  ShareVerdict Take(const std::string& caller, int64_t amount, int64_t capacity, int64_t floor,
                    ShareAsk* ask = nullptr);
  // Takes without a check (held past the bound is allowed; for amounts already in use).
  void Force(const std::string& caller, int64_t amount);
  void Give(const std::string& caller, int64_t amount);
  int64_t total() const { return total_; }
  int64_t held(const std::string& caller) const;
  int64_t callers() const { return static_cast<int64_t>(held_.size()); }

 private:
  std::map<std::string, int64_t> held_;  // no zero entries
  int64_t total_ = 0;                    // sum of held_
};

}  // namespace rnnserve::server::limits
