#include "server/metrics/text_format.h"

#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace rnnserve::server::metrics {

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  const auto result = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, result.ptr);
}

std::string EscapeLabelValue(absl::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

void AppendHeader(absl::string_view name, absl::string_view help, absl::string_view type,
                  std::string* out) {
  std::string escaped;
  for (char c : help) {
    if (c == '\\') {
      escaped += "\\\\";
    } else if (c == '\n') {
      escaped += "\\n";
    } else {
      escaped += c;
    }
  }
  absl::StrAppend(out, "# HELP ", name, " ", escaped, "\n# TYPE ", name, " ", type, "\n");
}

void AppendSample(absl::string_view name, const std::vector<std::string>& names,
                  const std::vector<std::string>& values, double value, std::string* out,
                  absl::string_view extra_name, absl::string_view extra_value) {
  absl::StrAppend(out, name);
  if (!names.empty() || !extra_name.empty()) {
    out->push_back('{');
    for (size_t i = 0; i < names.size(); ++i) {
      absl::StrAppend(out, i ? "," : "", names[i], "=\"", EscapeLabelValue(values[i]), "\"");
    }
    if (!extra_name.empty()) {
      absl::StrAppend(out, names.empty() ? "" : ",", extra_name, "=\"", extra_value, "\"");
    }
    out->push_back('}');
  }
  absl::StrAppend(out, " ", FormatValue(value), "\n");
}

}  // namespace rnnserve::server::metrics
