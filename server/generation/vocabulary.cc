#include "server/generation/vocabulary.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace rnnserve::server::generation {
namespace {

// Bytes of the UTF-8 code point that starts with `lead` (1 for a stray continuation byte).
size_t CodePointBytes(unsigned char lead) {
  if (lead >= 0xF0) return 4;
  if (lead >= 0xE0) return 3;
  if (lead >= 0xC0) return 2;
  return 1;
}

}  // namespace

absl::StatusOr<Vocabulary> Vocabulary::Parse(std::string_view json, const std::string& path) {
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || doc.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected a JSON object token -> id (textgenrnn's vocab.json)"));
  }
  Vocabulary v;
  for (const auto& [token, id] : doc.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": the id of token '", token, "' is not a non-negative integer"));
    }
    v.by_token_[token] = id.get<int64_t>();
    v.by_id_[id.get<int64_t>()] = token;
    if (token.empty() || CodePointBytes(token[0]) != token.size()) v.characters_ = false;
  }
  return v;
}

absl::StatusOr<Vocabulary> Vocabulary::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("no vocabulary file ", path));
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

absl::StatusOr<std::vector<int64_t>> Vocabulary::Encode(std::string_view text) const {
  std::vector<int64_t> ids;
  auto add = [&](std::string_view token, size_t at) -> absl::Status {
    auto it = by_token_.find(token);
    if (it == by_token_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt_text: '", std::string(token), "' at byte ", at, " is not in the model's ",
          characters_ ? "characters" : "words", " (vocab.json)"));
    }
    ids.push_back(it->second);
    return absl::OkStatus();
  };
  if (characters_) {
    for (size_t i = 0; i < text.size();) {
      const size_t n = std::min(CodePointBytes(text[i]), text.size() - i);
      if (auto s = add(text.substr(i, n), i); !s.ok()) return s;
      i += n;
    }
  } else {
    for (absl::string_view word :
         absl::StrSplit(absl::string_view(text.data(), text.size()), ' ', absl::SkipEmpty())) {
      const size_t at = static_cast<size_t>(word.data() - text.data());
      if (auto s = add(std::string_view(word.data(), word.size()), at); !s.ok()) return s;
    }
  }
  return ids;
}

std::string Vocabulary::Decode(int64_t id) const {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return "";
  return characters_ ? it->second : it->second + " ";
}

}  // namespace rnnserve::server::generation
