#include "server/batching/scheduler.h"

namespace rnnserve::server::batching {

std::string_view SchedulerKindName(SchedulerKind kind) {
  switch (kind) {
    case SchedulerKind::kDirect:
      return "none";
    case SchedulerKind::kDynamic:
      return "dynamic";
    case SchedulerKind::kCellular:
      return "cellular";
  }
  return "none";
}

}  // namespace rnnserve::server::batching
