#include "tests/support/torch_lengths.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "models/model_loader.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {

namespace fs = std::filesystem;

std::vector<std::string> TorchLengthsCases() {
  std::vector<std::string> names;
  const fs::path dir = SourcePath("tests/fixtures/torch_lengths");
  if (fs::is_directory(dir)) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      names.push_back(entry.path().filename().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

::testing::AssertionResult TorchLengthsCaseMatches(const engine::Engine& engine,
                                                   const std::string& name, double rtol,
                                                   double atol, int runs) {
  const std::string dir = SourcePath("tests/fixtures/torch_lengths/" + name);
  auto model = models::LoadModelFile(dir + "/model.onnx");
  if (!model.ok()) return ::testing::AssertionFailure() << "load: " << model.status();
  auto data = client::ReadNpz(dir + "/data.npz");
  if (!data.ok()) return ::testing::AssertionFailure() << data.status();
  auto compiled = engine.Compile(*model, {});
  if (!compiled.ok()) return ::testing::AssertionFailure() << "compile: " << compiled.status();
  engine::Batch batch;
  const client::NpyArray& x = data->at("in_0");
  batch.inputs.push_back(x.is_integer() ? ToInt64Tensor(x) : ToFloatTensor(x));
  for (double len : data->at("lengths").values) batch.lengths.push_back(static_cast<int>(len));
  std::vector<engine::Tensor> out;
  absl::Status run;
  for (int r = 0; r < runs && run.ok(); ++r) run = (*compiled)->Run(batch, &out);
  if (fs::exists(dir + "/refused.txt")) {
    std::ifstream in(dir + "/refused.txt");
    std::string layer;
    std::getline(in, layer);
    layer = std::string(absl::StripAsciiWhitespace(layer));
    if (run.code() != absl::StatusCode::kInvalidArgument ||
        !absl::StrContains(run.message(), absl::StrCat("'", layer, "'"))) {
      return ::testing::AssertionFailure()
             << "expected INVALID_ARGUMENT naming layer '" << layer << "', got " << run;
    }
    batch.lengths.clear();
    if (auto s = (*compiled)->Run(batch, &out); !s.ok()) {
      return ::testing::AssertionFailure() << "without lengths: " << s;
    }
    return ::testing::AssertionSuccess() << run.message();
  }
  if (!run.ok()) return ::testing::AssertionFailure() << "run: " << run;
  if (out.size() != model->outputs.size()) {
    return ::testing::AssertionFailure() << out.size() << " outputs";
  }
  for (size_t k = 0; k < out.size(); ++k) {
    const auto it = data->find("out_" + std::to_string(k));
    if (it == data->end()) return ::testing::AssertionFailure() << "no out_" << k;
    auto close = AllClose(out[k], it->second, rtol, atol);
    if (!close) return close << " (output " << model->outputs[k].name << ")";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace rnnserve::testing
