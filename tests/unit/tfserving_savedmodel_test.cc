// SavedModels of two inputs and two outputs served through TF Serving's front ends
// (server/services/tfserving): gRPC Predict with both inputs, REST row (`instances` of named
// inputs) and columnar (`inputs`) requests, and GetModelMetadata's serving_default against the
// signature as TensorFlow reads it (tests/fixtures/savedmodel/*/signature.json, made by
// models/scripts/make_savedmodel_fixtures.py with tf.saved_model.load(...).signatures). The
// Keras 3 export answers with its signature's keys (output_0, output_1); the same model's
// .keras file with Keras's output layer names; the tf_keras SavedModel with the output layer
// names its own signature has.

#include <filesystem>
#include <fstream>
#include <future>

#include <unistd.h>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/model_repository.h"
#include "server/services/tfserving/model_spec.h"
#include "server/services/tfserving/rest_routes.h"
#include "server/services/tfserving/tfserving_service.h"
#include "tests/support/callback_call.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

namespace fs = std::filesystem;
namespace ts = tensorflow::serving;
using server::tfserving::PredictionService;
using server::tfserving::RestRoutes;
using Json = nlohmann::json;

constexpr char kDir[] = "tests/fixtures/savedmodel/";
constexpr char kExport[] = "Keras3ExportTwoInputsTwoOutputs";
constexpr char kTfKeras[] = "SavedModelTwoInputsTwoOutputsDefaultSave";

Json Signature(const std::string& c) {
  std::ifstream in(SourcePath(std::string(kDir) + c + "/signature.json"));
  return Json::parse(in);
}

client::NpyArray CaseNpy(const std::string& c, const std::string& file) {
  return LoadNpy(std::string(kDir) + c + "/" + file);
}

// A float array as nested JSON lists, or its row `b` only.
Json Lists(const client::NpyArray& x, const double* v, size_t axis) {
  if (axis == x.shape.size()) return *v;
  Json out = Json::array();
  int64_t stride = 1;
  for (size_t a = axis + 1; a < x.shape.size(); ++a) stride *= x.shape[a];
  for (int64_t i = 0; i < x.shape[axis]; ++i) out.push_back(Lists(x, v + i * stride, axis + 1));
  return out;
}

engine::Tensor AsTensor(const Json& v) {
  engine::Shape shape;
  for (const Json* p = &v; p->is_array(); p = &(*p)[0]) shape.push_back(p->size());
  std::vector<float> flat;
  std::function<void(const Json&)> walk = [&](const Json& j) {
    if (j.is_array()) {
      for (const Json& e : j) walk(e);
    } else {
      flat.push_back(j.get<float>());
    }
  };
  walk(v);
  return engine::Tensor::Float(shape, std::move(flat));
}

class TfServingSavedModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::path(::testing::TempDir()) / ("tfserving_sm_" + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    fs::copy(SourcePath(std::string(kDir) + kExport + "/model"), root_ / "export",
             fs::copy_options::recursive);
    fs::copy(SourcePath(std::string(kDir) + kTfKeras + "/model"), root_ / "tfkeras",
             fs::copy_options::recursive);
    fs::create_directories(root_ / "keras/1");
    fs::copy_file(SourcePath(std::string(kDir) + kExport + "/model.keras"),
                  root_ / "keras/1/model.keras");
    auto repository = server::ModelRepository::Open(root_.string());
    ASSERT_TRUE(repository.ok()) << repository.status();
    repository_ = std::move(*repository).release();
  }
  static void TearDownTestSuite() {
    delete repository_;
    repository_ = nullptr;
    fs::remove_all(root_);
  }

  Json Rest(const std::string& path, const Json& body) {
    server::http::Request request{.method = "POST", .path = path, .body = body.dump()};
    std::promise<server::http::Response> answer;
    routes_.Handle(request, [&answer](server::http::Response r) { answer.set_value(r); });
    server::http::Response r = answer.get_future().get();
    EXPECT_EQ(r.status, 200) << r.body;
    return Json::parse(r.body, nullptr, false);
  }

  static fs::path root_;
  static server::ModelRepository* repository_;
  RestRoutes routes_{repository_, {}};
  PredictionService prediction_{repository_, {}};
};
fs::path TfServingSavedModelTest::root_;
server::ModelRepository* TfServingSavedModelTest::repository_ = nullptr;

// Predict over gRPC with both inputs as tensor_content; each output under its signature key.
void ExpectGrpcPredict(PredictionService& prediction, const std::string& model,
                       const std::string& c) {
  const Json sig = Signature(c);
  ts::PredictRequest request;
  request.mutable_model_spec()->set_name(model);
  for (size_t i = 0; i < sig["input_order"].size(); ++i) {
    const auto x = CaseNpy(c, "input_" + std::to_string(i) + ".npy");
    tensorflow::TensorProto& t =
        (*request.mutable_inputs())[sig["input_order"][i].get<std::string>()];
    t.set_dtype(tensorflow::DT_FLOAT);
    for (int64_t d : x.shape) t.mutable_tensor_shape()->add_dim()->set_size(d);
    std::vector<float> v(x.values.begin(), x.values.end());
    t.set_tensor_content(
        std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
  }
  ts::PredictResponse response;
  const grpc::Status s = CallAndWait(
      [&](grpc::CallbackServerContext* ctx) { prediction.Predict(ctx, &request, &response); });
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(response.outputs_size(), 2);
  for (size_t k = 0; k < sig["output_order"].size(); ++k) {
    const std::string key = sig["output_order"][k].get<std::string>();
    ASSERT_TRUE(response.outputs().count(key)) << key;
    const tensorflow::TensorProto& t = response.outputs().at(key);
    engine::Shape shape;
    for (const auto& d : t.tensor_shape().dim()) shape.push_back(d.size());
    std::vector<float> v(t.tensor_content().size() / sizeof(float));
    std::memcpy(v.data(), t.tensor_content().data(), v.size() * sizeof(float));
    if (v.empty()) v.assign(t.float_val().begin(), t.float_val().end());
    EXPECT_TRUE(AllClose(engine::Tensor::Float(shape, std::move(v)),
                         CaseNpy(c, "expected_" + std::to_string(k) + ".npy"), 1e-5, 1e-5))
        << key;
  }
}

TEST_F(TfServingSavedModelTest, GrpcPredictKeras3ExportTwoInputsTwoOutputs) {
  ExpectGrpcPredict(prediction_, "export", kExport);
}

TEST_F(TfServingSavedModelTest, GrpcPredictTfKerasTwoInputsTwoOutputs) {
  ExpectGrpcPredict(prediction_, "tfkeras", kTfKeras);
}

TEST_F(TfServingSavedModelTest, RestRowAndColumnarKeras3ExportTwoInputsTwoOutputs) {
  const Json sig = Signature(kExport);
  Json columns = Json::object();
  Json rows = Json::array();
  for (size_t i = 0; i < sig["input_order"].size(); ++i) {
    const std::string name = sig["input_order"][i].get<std::string>();
    const auto x = CaseNpy(kExport, "input_" + std::to_string(i) + ".npy");
    columns[name] = Lists(x, x.values.data(), 0);
    for (size_t b = 0; b < columns[name].size(); ++b) {
      if (rows.size() <= b) rows.push_back(Json::object());
      rows[b][name] = columns[name][b];
    }
  }
  const Json columnar = Rest("/v1/models/export:predict", {{"inputs", columns}});
  const Json row = Rest("/v1/models/export:predict", {{"instances", rows}});
  for (size_t k = 0; k < sig["output_order"].size(); ++k) {
    const std::string key = sig["output_order"][k].get<std::string>();
    const auto want = CaseNpy(kExport, "expected_" + std::to_string(k) + ".npy");
    EXPECT_TRUE(AllClose(AsTensor(columnar["outputs"][key]), want, 1e-5, 1e-5)) << key;
    Json per_row = Json::array();
    for (const Json& r : row["predictions"]) per_row.push_back(r[key]);
    EXPECT_TRUE(AllClose(AsTensor(per_row), want, 1e-5, 1e-5)) << key;
  }
}

// GetModelMetadata's serving_default has TensorFlow's keys, dtypes and shapes; the .keras file
// of the same model has Keras's output names with the same dtypes and shapes.
TEST_F(TfServingSavedModelTest, MetadataMatchesTensorFlowsSignature) {
  struct Served {
    const char* model;
    const char* fixture;
    const char* names;  // signature.json's list of the output keys, in Keras's order
  };
  for (const Served& m :
       {Served{"export", kExport, "output_order"}, Served{"keras", kExport, "keras_outputs"},
        Served{"tfkeras", kTfKeras, "output_order"}}) {
    const Json sig = Signature(m.fixture);
    ts::GetModelMetadataRequest request;
    request.mutable_model_spec()->set_name(m.model);
    request.add_metadata_field("signature_def");
    ts::GetModelMetadataResponse response;
    grpc::ServerContext context;
    ASSERT_TRUE(prediction_.GetModelMetadata(&context, &request, &response).ok()) << m.model;
    ts::SignatureDefMap map;
    ASSERT_TRUE(response.metadata().at("signature_def").UnpackTo(&map));
    const tensorflow::SignatureDef& ours = map.signature_def().at("serving_default");
    auto expect = [&](const tensorflow::TensorInfo& info, const Json& want,
                      const std::string& key) {
      EXPECT_EQ(info.dtype(),
                want["dtype"] == "float32" ? tensorflow::DT_FLOAT : tensorflow::DT_INT64)
          << m.model << " " << key;
      ASSERT_EQ(info.tensor_shape().dim_size(), static_cast<int>(want["shape"].size()));
      for (size_t d = 0; d < want["shape"].size(); ++d) {
        EXPECT_EQ(info.tensor_shape().dim(d).size(),
                  want["shape"][d].is_null() ? -1 : want["shape"][d].get<int64_t>())
            << m.model << " " << key;
      }
    };
    ASSERT_EQ(ours.inputs_size(), static_cast<int>(sig["inputs"].size())) << m.model;
    for (const auto& key : sig["inputs"]) {
      ASSERT_TRUE(ours.inputs().count(key.get<std::string>())) << m.model << " " << key;
      expect(ours.inputs().at(key.get<std::string>()), sig["tensors"][key.get<std::string>()],
             key.get<std::string>());
    }
    ASSERT_EQ(ours.outputs_size(), static_cast<int>(sig["outputs"].size())) << m.model;
    for (size_t k = 0; k < sig[m.names].size(); ++k) {
      const std::string key = sig[m.names][k].get<std::string>();
      const std::string tf_key = sig["output_order"][k].get<std::string>();
      ASSERT_TRUE(ours.outputs().count(key)) << m.model << " " << key;
      expect(ours.outputs().at(key), sig["tensors"][tf_key], key);
    }
  }
}

}  // namespace
}  // namespace rnnserve::testing
