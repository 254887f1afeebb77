#pragma once

// Pieces of the Prometheus text exposition format, version 0.0.4:
//   # HELP <name> <help, with \\ and \n escaped>
//   # TYPE <name> counter|gauge|histogram
//   <name>{<label>="<value, with \\ \" and \n escaped>",...} <value>
// Values print as the shortest decimal that reads back to the same double; infinities as
// +Inf / -Inf, NaN as NaN.

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace rnnserve::server::metrics {

inline constexpr char kTextContentType[] = "text/plain; version=0.0.4; charset=utf-8";

std::string FormatValue(double v);
std::string EscapeLabelValue(absl::string_view v);

// "# HELP" and "# TYPE" lines.
void AppendHeader(absl::string_view name, absl::string_view help, absl::string_view type,
                  std::string* out);

// One sample line. `names` and `values` have the same length; an extra label (used for a
// histogram's `le`) is added last when `extra_name` is not empty.
void AppendSample(absl::string_view name, const std::vector<std::string>& names,
                  const std::vector<std::string>& values, double value, std::string* out,
                  absl::string_view extra_name = {}, absl::string_view extra_value = {});

}  // namespace rnnserve::server::metrics
