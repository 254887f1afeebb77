#pragma once

// The vocabulary beside a language model's file: vocab.json, a JSON object token -> id, as
// textgenrnn writes it. One-character keys (a UTF-8 code point each) make a character-level
// vocabulary: text is split into characters and tokens print as themselves. Otherwise it is
// word-level: text is split on spaces and tokens print followed by a space.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace rnnserve::server::generation {

class Vocabulary {
 public:
  // Parses the JSON text of `path` (for messages). INVALID_ARGUMENT for text that is not an
  // object of non-negative integer ids.
  static absl::StatusOr<Vocabulary> Parse(std::string_view json, const std::string& path);
  // Reads and parses `path`; NOT_FOUND when there is no such file.
  static absl::StatusOr<Vocabulary> Load(const std::string& path);

  // The ids of `text`; INVALID_ARGUMENT naming the first token that is not in the vocabulary.
  absl::StatusOr<std::vector<int64_t>> Encode(std::string_view text) const;
  // The text of token `id` ("" for an id no token has, such as the padding id 0).
  std::string Decode(int64_t id) const;
  bool characters() const { return characters_; }
  int64_t size() const { return static_cast<int64_t>(by_token_.size()); }

 private:
  std::map<std::string, int64_t, std::less<>> by_token_;
  std::map<int64_t, std::string> by_id_;
  bool characters_ = true;
};

}  // namespace rnnserve::server::generation
