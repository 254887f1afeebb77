#include "server/limits/stream_limits.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/limits/caller_identity.h"

namespace rnnserve::server::limits {

absl::StatusOr<std::unique_ptr<StreamLimits>> StreamLimits::Create(Options options) {
  if (options.max_streams <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_streams must be positive; was ", options.max_streams));
  }
  if (options.idle_seconds < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("idle_seconds must not be negative; was ", options.idle_seconds));
  }
  if (!options.now) return absl::InvalidArgumentError("StreamLimits needs a clock");
  if (options.fair_floor_percent < 0 || options.fair_floor_percent > 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("fair_floor_percent must be in [0, 100]; was ", options.fair_floor_percent));
  }
  std::unique_ptr<StreamLimits> limits(new StreamLimits(std::move(options)));
  if (limits->options_.reaper_thread && limits->options_.idle_seconds > 0) {
    limits->reaper_ = std::thread([l = limits.get()] { l->ReaperLoop(); });
  }
  return limits;
}

StreamLimits::~StreamLimits() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (reaper_.joinable()) reaper_.join();
}

void StreamLimits::ReaperLoop() {
  const absl::Duration period =
      std::min(absl::Seconds(options_.idle_seconds) / 4, absl::Seconds(1));
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), period);
    if (stopping_) break;
    mu_.Unlock();
    Reap();
    mu_.Lock();
  }
}

absl::StatusOr<StreamLimits::Ticket> StreamLimits::Open(grpc::ServerContextBase* context,
                                                        const std::string& caller,
                                                        std::function<void()> before_cancel) {
  std::string key = ShareKey(caller);
  absl::MutexLock lock(&mu_);
  ShareAsk ask;
  const ShareVerdict v =
      per_caller_.Take(key, 1, options_.max_streams,
                       ShareFloor(options_.max_streams, options_.fair_floor_percent), &ask);
  if (v != ShareVerdict::kGranted) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the server has ", streams_.size(), " ", options_.calls, ", its limit (",
                     options_.flag, "=", options_.max_streams, ")",
                     v == ShareVerdict::kBoundFull ? "" : absl::StrCat("; ", ExplainShare(ask, v)),
                     "; close one or retry later"));
  }
  const uint64_t id = next_id_++;
  streams_[id] = StreamState{.context = context,
                             .before_cancel = std::move(before_cancel),
                             .idle_since = options_.now(),
                             .caller = std::move(key)};
  return Ticket(this, id);
}

int StreamLimits::Reap() {
  if (options_.idle_seconds <= 0) return 0;
  const absl::Time now = options_.now();
  const absl::Duration idle = absl::Seconds(options_.idle_seconds);
  absl::MutexLock lock(&mu_);
  int reaped = 0;
  for (auto& [id, s] : streams_) {
    if (s.busy || s.reaped || now - s.idle_since <= idle) continue;
    s.reaped = true;
    if (s.before_cancel) s.before_cancel();
    // The context lives while its stream is in streams_: the Ticket's Close takes mu_.
    if (s.context != nullptr) s.context->TryCancel();
    ++reaped;
  }
  return reaped;
}

int StreamLimits::open() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(streams_.size());
}

void StreamLimits::Ticket::Busy(bool busy) {
  if (owner_ == nullptr) return;
  absl::MutexLock lock(&owner_->mu_);
  auto it = owner_->streams_.find(id_);
  if (it == owner_->streams_.end()) return;
  it->second.busy = busy;
  if (!busy) it->second.idle_since = owner_->options_.now();
}

bool StreamLimits::Ticket::reaped() const {
  if (owner_ == nullptr) return false;
  absl::MutexLock lock(&owner_->mu_);
  auto it = owner_->streams_.find(id_);
  return it != owner_->streams_.end() && it->second.reaped;
}

void StreamLimits::Ticket::Close() {
  if (owner_ == nullptr) return;
  {
    absl::MutexLock lock(&owner_->mu_);
    auto it = owner_->streams_.find(id_);
    if (it != owner_->streams_.end()) {
      owner_->per_caller_.Give(it->second.caller, 1);
      owner_->streams_.erase(it);
    }
  }
  owner_ = nullptr;
}

StreamLimits::Ticket::Ticket(Ticket&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), id_(other.id_) {}

StreamLimits::Ticket& StreamLimits::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    Close();
    owner_ = std::exchange(other.owner_, nullptr);
    id_ = other.id_;
  }
  return *this;
}

absl::StatusOr<StreamLimits::Ticket> OpenIn(StreamLimits* limits, grpc::ServerContextBase* context,
                                            const std::string& caller,
                                            std::function<void()> before_cancel) {
  if (limits == nullptr) return StreamLimits::Ticket();
  return limits->Open(context, caller, std::move(before_cancel));
}

}  // namespace rnnserve::server::limits
