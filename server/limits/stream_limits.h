#pragma once

// Bounds on streaming calls (StreamPredict and KServe ModelStreamInfer, counted together): at
// most max_streams open at once (--max-streams; one more
// is refused with RESOURCE_EXHAUSTED naming the cap), and a stream that has carried no
// message for idle_seconds (--stream-idle-seconds) is closed by the server (its client sees
// CANCELLED; its sequences end with it). On the synchronous gRPC API every open stream holds
// a server thread while it waits for its next message, so these two are what keep idle
// clients from holding every thread.
//
// A stream is open from Open() until its Ticket is destroyed. A background thread checks the
// open streams every min(idle / 4, 1 s) and cancels (grpc::ServerContextBase::TryCancel: a
// synchronous or a callback call) those idle too long; Reap() does the same at once (tests).
// Thread-safe. Generate, on the callback API (no thread held), has an instance of its own
// (--max-generations; Options::calls and flag name it in the refusal).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/server_context.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/limits/fair_share.h"

namespace rnnserve::server::limits {

class StreamLimits {
 public:
  struct Options {
    int max_streams = 256;       // must be positive
    int64_t idle_seconds = 300;  // 0: streams are never closed for idleness; not negative
    std::function<absl::Time()> now = [] { return absl::Now(); };
    bool reaper_thread = true;  // false: only Reap() closes idle streams (tests)
    // Each caller's floor and the newcomers' reserve, in percent of max_streams
    // (fair_share.h; at least one stream); 0..100, 100: first come, first served.
    int fair_floor_percent = 6;
    // What the refusal names: the calls counted, and the flag that bounds them.
    std::string calls = "streams open (StreamPredict and ModelStreamInfer)";
    std::string flag = "--max-streams";
  };
  static absl::StatusOr<std::unique_ptr<StreamLimits>> Create(Options options);
  ~StreamLimits();

  // One open stream; closes it (for the count) when destroyed. Movable, not copyable.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept;
    Ticket& operator=(Ticket&& other) noexcept;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() { Close(); }
    // The stream is working on a message (busy: never idle) or not (idle from now): waiting
    // for the client's next message, or writing an answer (a write the client does not take
    // within the idle limit closes the stream: call Busy(false) before Write).
    void Busy(bool busy);
    // True when it was closed for being idle (its Read then fails).
    bool reaped() const;
    // Unique among this process's streams.
    uint64_t id() const { return id_; }
    void Close();

   private:
    friend class StreamLimits;
    Ticket(StreamLimits* owner, uint64_t id) : owner_(owner), id_(id) {}
    StreamLimits* owner_ = nullptr;
    uint64_t id_ = 0;
  };

  // Opens a stream of `context` (TryCancel'ed when idle too long; may be null in tests) for
  // `caller` (a CallerIdentity, counted by its ShareKey).
  // `before_cancel`, when set, runs just before an idle stream is cancelled (under this
  // object's lock: it must not call back into it), so what the stream holds (its sequences) is
  // released before its client sees CANCELLED and can, say, start the sequence again.
  absl::StatusOr<Ticket> Open(grpc::ServerContextBase* context, const std::string& caller,
                              std::function<void()> before_cancel = nullptr);
  // Cancels the streams idle past idle_seconds now; returns how many.
  int Reap();
  int open() const;

 private:
  explicit StreamLimits(Options options) : options_(std::move(options)) {}
  void ReaperLoop();

  struct StreamState {
    grpc::ServerContextBase* context = nullptr;
    std::function<void()> before_cancel;
    absl::Time idle_since;
    bool busy = false;
    bool reaped = false;
    std::string caller;  // ShareKey
  };
  const Options options_;
  mutable absl::Mutex mu_;
  std::map<uint64_t, StreamState> streams_ ABSL_GUARDED_BY(mu_);
  ShareLedger per_caller_ ABSL_GUARDED_BY(mu_);  // streams_ by caller
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread reaper_;
};

// `limits`' Open when it is set, otherwise an empty Ticket (no limit).
absl::StatusOr<StreamLimits::Ticket> OpenIn(StreamLimits* limits, grpc::ServerContextBase* context,
                                            const std::string& caller,
                                            std::function<void()> before_cancel = nullptr);

}  // namespace rnnserve::server::limits
