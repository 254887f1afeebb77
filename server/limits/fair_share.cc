#include "server/limits/fair_share.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace rnnserve::server::limits {

int64_t ShareFloor(int64_t capacity, int percent) {
  const int p = std::clamp(percent, 0, 100);
  return std::clamp<int64_t>(capacity / 100 * p + capacity % 100 * p / 100, 1,
                             std::max<int64_t>(capacity, 1));
}

int64_t FairShareOf(int64_t capacity, int64_t floor, int64_t active) {
  return std::max(floor, capacity / std::max<int64_t>(active, 1));
}

ShareVerdict CheckShare(const ShareAsk& a) {
  if (a.amount > a.capacity - a.total) return ShareVerdict::kBoundFull;
  if (a.amount > FairShareOf(a.capacity, a.floor, a.active) - a.held) {
    return ShareVerdict::kOverShare;
  }
  if (a.held > 0 && a.amount > a.floor - a.held && a.amount > a.capacity - a.floor - a.total) {
    return ShareVerdict::kReserved;
  }
  return ShareVerdict::kGranted;
}

std::string ExplainShare(const ShareAsk& a, ShareVerdict verdict) {
  switch (verdict) {
    case ShareVerdict::kGranted:
      return "";
    case ShareVerdict::kBoundFull:
      return absl::StrCat(a.total, " of ", a.capacity, " are held");
    case ShareVerdict::kOverShare:
      return absl::StrCat("this caller holds ", a.held, " and its fair share is ",
                          FairShareOf(a.capacity, a.floor, a.active), " (", a.capacity,
                          " shared by ", a.active, " active callers, at least the floor of ",
                          a.floor, ", --fair-floor-percent)");
    case ShareVerdict::kReserved:
      return absl::StrCat("this caller holds ", a.held, " and the last ", a.floor, " of ",
                          a.capacity, " are kept for callers below the floor (", a.total,
                          " held; --fair-floor-percent)");
  }
  return "";
}

ShareVerdict ShareLedger::Take(const std::string& caller, int64_t amount, int64_t capacity,
                               int64_t floor, ShareAsk* ask) {
  const int64_t held = this->held(caller);
  const ShareAsk a{.capacity = capacity,
                   .floor = floor,
                   .total = total_,
                   .held = held,
                   .active = callers() + (held == 0 ? 1 : 0),
                   .amount = amount};
  if (ask != nullptr) *ask = a;
  const ShareVerdict v = CheckShare(a);
  if (v == ShareVerdict::kGranted) Force(caller, amount);
  return v;
}

void ShareLedger::Force(const std::string& caller, int64_t amount) {
  if (amount <= 0) return;
  held_[caller] += amount;
  total_ += amount;
}

void ShareLedger::Give(const std::string& caller, int64_t amount) {
  if (amount <= 0) return;
  auto it = held_.find(caller);
  if (it == held_.end()) return;
  const int64_t given = std::min(amount, it->second);
  total_ -= given;
  it->second -= given;
  if (it->second <= 0) held_.erase(it);
}

int64_t ShareLedger::held(const std::string& caller) const {
  auto it = held_.find(caller);
  return it == held_.end() ? 0 : it->second;
}

}  // namespace rnnserve::server::limits
