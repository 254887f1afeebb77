#pragma once

// The Keras conformance corpus (models/scripts/make_keras_fixtures.py writes it): its manifest
// tests/fixtures/keras/cases.json, parsed once, and its case names.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rnnserve::testing {

// The folder of the corpus, relative to the source tree.
inline constexpr char kKerasCorpus[] = "tests/fixtures/keras";

// {"cases": {name: {"files": [...], "inputs": [...], "outputs": [...], "keras": "..."}}}, or a
// discarded value when the file does not parse.
const nlohmann::json& KerasCorpusManifest();

std::vector<std::string> KerasCaseNames();

}  // namespace rnnserve::testing
