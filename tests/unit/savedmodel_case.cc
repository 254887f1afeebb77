#include "tests/unit/savedmodel_case.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

namespace fs = std::filesystem;
using server::Servable;
using server::TensorSignature;

constexpr char kDir[] = "tests/fixtures/savedmodel/";

std::string CaseFile(const std::string& name, const std::string& file) {
  return std::string(kDir) + name + "/" + file;
}

// The position of `key` in signature.json's `order` list; `fallback` where it has none.
size_t KerasIndex(const nlohmann::json& sig, const char* order, const std::string& key,
                  size_t fallback) {
  if (!sig.contains(order)) return fallback;
  const auto names = sig[order].get<std::vector<std::string>>();
  const auto it = std::find(names.begin(), names.end(), key);
  return it == names.end() ? fallback : static_cast<size_t>(it - names.begin());
}

// Runs `s` on the case's inputs, each matched to its Keras input by name.
std::vector<engine::Tensor> RunCase(const Servable& s, const std::string& name,
                                    const nlohmann::json& sig) {
  engine::Batch batch;
  for (size_t i = 0; i < s.inputs().size(); ++i) {
    const size_t k = KerasIndex(sig, "input_order", s.inputs()[i].name, i);
    const auto x = LoadNpy(CaseFile(name, "input_" + std::to_string(k) + ".npy"));
    batch.inputs.push_back(x.is_integer() ? ToInt64Tensor(x) : ToFloatTensor(x));
  }
  std::vector<engine::Tensor> out;
  const absl::Status run = s.Run(std::move(batch), &out);
  EXPECT_TRUE(run.ok()) << run;
  return out;
}

std::set<std::string> Names(const std::vector<TensorSignature>& sigs) {
  std::set<std::string> names;
  for (const auto& s : sigs) names.insert(s.name);
  return names;
}

// A served tensor's dtype and shape against the signature's, as TensorFlow reads it. Integer
// inputs are served as int64 (int32 is accepted too, tensor_proto.h).
void ExpectSignatureTensor(const TensorSignature& t, const nlohmann::json& want) {
  const std::string dtype = want["dtype"].get<std::string>();
  EXPECT_EQ(t.dtype, dtype == "float32" ? engine::DType::kFloat32 : engine::DType::kInt64)
      << t.name << ": " << dtype;
  engine::Shape shape;
  for (const auto& d : want["shape"]) shape.push_back(d.is_null() ? -1 : d.get<int64_t>());
  EXPECT_EQ(t.shape, shape) << t.name;
}

}  // namespace

std::string CaseDir(const std::string& name) { return SourcePath(std::string(kDir) + name); }

absl::StatusOr<std::unique_ptr<Servable>> LoadDir(const std::string& model_dir) {
  v1::ModelConfig config;
  config.set_name("model");
  return Servable::Load(model_dir, 1, config);
}

void ExpectCase(const std::string& name, bool compare_keras_file) {
  std::ifstream in(CaseDir(name) + "/signature.json");
  const nlohmann::json sig = nlohmann::json::parse(in);

  auto saved = LoadDir(CaseDir(name) + "/model");
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ((*saved)->platform(), "tf_savedmodel");
  const auto got = RunCase(**saved, name, sig);
  ASSERT_EQ(got.size(), (*saved)->outputs().size());
  std::vector<size_t> keras_index;  // the SavedModel's output i is Keras's output keras_index[i]
  for (size_t i = 0; i < got.size(); ++i) {
    keras_index.push_back(KerasIndex(sig, "output_order", (*saved)->outputs()[i].name, i));
    const auto want =
        LoadNpy(CaseFile(name, "expected_" + std::to_string(keras_index[i]) + ".npy"));
    EXPECT_TRUE(AllClose(got[i], want, 1e-5, 1e-5)) << "output " << (*saved)->outputs()[i].name;
  }

  if (sig.contains("tensors")) {
    for (const auto* list : {&(*saved)->inputs(), &(*saved)->outputs()}) {
      for (const TensorSignature& t : *list) {
        ASSERT_TRUE(sig["tensors"].contains(t.name)) << t.name;
        ExpectSignatureTensor(t, sig["tensors"][t.name]);
      }
    }
  }
  if (sig.contains("inputs")) {
    EXPECT_EQ(Names((*saved)->inputs()), sig["inputs"].get<std::set<std::string>>());
    EXPECT_EQ(Names((*saved)->outputs()), sig["outputs"].get<std::set<std::string>>());
  }
  if (!compare_keras_file) return;

  // The .h5 (or, for Keras 3, the .keras) of the same model, served the same way; its outputs
  // are in Keras's order.
  const fs::path h5_dir = fs::path(::testing::TempDir()) / ("h5_" + name);
  fs::remove_all(h5_dir);
  fs::create_directories(h5_dir / "1");
  const std::string keras_file =
      fs::exists(CaseDir(name) + "/model.h5") ? "model.h5" : "model.keras";
  fs::copy_file(CaseDir(name) + "/" + keras_file, h5_dir / "1" / keras_file,
                fs::copy_options::overwrite_existing);
  auto h5 = LoadDir(h5_dir.string());
  ASSERT_TRUE(h5.ok()) << h5.status();
  const auto from_h5 = RunCase(**h5, name, sig);
  ASSERT_EQ(from_h5.size(), got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const engine::Tensor& b_tensor = from_h5[keras_index[i]];
    ASSERT_EQ(got[i].shape(), b_tensor.shape()) << "output " << i;
    const float* a = got[i].f32();
    const float* b = b_tensor.f32();
    for (int64_t j = 0; j < got[i].num_elements(); ++j) {
      ASSERT_NEAR(a[j], b[j], 1e-6) << "output " << i << " element " << j;
    }
  }
  EXPECT_EQ(Names((*saved)->inputs()), Names((*h5)->inputs()));
  // Keras 3's export names its outputs output_0, ...; the .keras file names them after layers
  // (checked against Keras's names below).
  if (keras_file == "model.h5") {
    EXPECT_EQ(Names((*saved)->outputs()), Names((*h5)->outputs()));
  }

  if (!sig.contains("tensors")) return;
  // The Keras file of the same model: the same inputs; its outputs, in Keras's order, are
  // named as Keras names them (keras_outputs: the output layers' names, for a Keras 3 model
  // whose export says output_<i>) and have the export's dtypes and shapes.
  for (const TensorSignature& t : (*h5)->inputs()) {
    ASSERT_TRUE(sig["tensors"].contains(t.name)) << t.name;
    ExpectSignatureTensor(t, sig["tensors"][t.name]);
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const TensorSignature& t = (*h5)->outputs()[keras_index[i]];
    if (sig.contains("keras_outputs")) {
      EXPECT_EQ(t.name, sig["keras_outputs"][keras_index[i]].get<std::string>());
    } else {
      EXPECT_EQ(t.name, (*saved)->outputs()[i].name);
    }
    ExpectSignatureTensor(t, sig["tensors"][(*saved)->outputs()[i].name]);
  }
}

}  // namespace rnnserve::testing
