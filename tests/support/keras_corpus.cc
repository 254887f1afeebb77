#include "tests/support/keras_corpus.h"

#include <fstream>
#include <sstream>

#include "tests/support/fixtures.h"

namespace rnnserve::testing {

const nlohmann::json& KerasCorpusManifest() {
  static const nlohmann::json manifest = [] {
    std::ifstream in(SourcePath(std::string(kKerasCorpus) + "/cases.json"));
    std::stringstream text;
    text << in.rdbuf();
    return nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  }();
  return manifest;
}

std::vector<std::string> KerasCaseNames() {
  std::vector<std::string> names;
  const nlohmann::json& m = KerasCorpusManifest();
  if (m.is_object() && m.contains("cases")) {
    for (const auto& [name, _] : m["cases"].items()) names.push_back(name);
  }
  return names;
}

}  // namespace rnnserve::testing
