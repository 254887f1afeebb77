#include "server/batching/clock.h"

#include "absl/time/clock.h"

namespace rnnserve::server::batching {
namespace {

class WallClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                         absl::Time deadline) const override {
    return mu->AwaitWithDeadline(cond, deadline);
  }
};

}  // namespace

const Clock* RealClock() {
  static const WallClock* const clock = new WallClock();
  return clock;
}

}  // namespace rnnserve::server::batching
