// TF Serving's front ends (server/services/tfserving) on the real example model
// (models/examples/waveform_lstm, a Keras LSTM) and a Keras model with three outputs
// (tests/fixtures/keras/Keras2LstmReturnState), compared with Keras's own predictions
// (models/scripts/make_example.py, tests/fixtures/keras): the TensorProto codec, gRPC Predict
// and GetModelMetadata, GetModelStatus, and the REST routes called through Handle().

#include <filesystem>
#include <fstream>
#include <future>

#include <unistd.h>

#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/model_repository.h"
#include "server/services/tfserving/model_spec.h"
#include "server/services/tfserving/rest_json.h"
#include "server/services/tfserving/rest_routes.h"
#include "server/services/tfserving/tensor_proto.h"
#include "server/services/tfserving/tfserving_service.h"
#include "tests/support/callback_call.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

namespace ts = tensorflow::serving;
using server::tfserving::ModelService;
using server::tfserving::PredictionService;
using server::tfserving::RestRoutes;
using ::testing::HasSubstr;
using Json = nlohmann::json;

void CopyModel(const std::string& from, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir / "1");
  std::filesystem::copy_file(SourcePath(from), dir / "1/model.h5",
                             std::filesystem::copy_options::overwrite_existing);
}

engine::Tensor AsTensor(const ts::PredictResponse& r, const std::string& name) {
  const tensorflow::TensorProto& t = r.outputs().at(name);
  engine::Shape shape;
  for (const auto& d : t.tensor_shape().dim()) shape.push_back(d.size());
  return engine::Tensor::Float(shape, {t.float_val().begin(), t.float_val().end()});
}

// A REST answer: its status, its body, and the body parsed.
struct RestAnswer {
  int status = 0;
  std::string body;
  Json json;
};

// Nested JSON lists as a float tensor.
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

// The example's input [3, 40, 2] as JSON lists.
Json InputJson(const client::NpyArray& x) {
  Json rows = Json::array();
  for (int64_t b = 0; b < x.shape[0]; ++b) {
    Json steps = Json::array();
    for (int64_t t = 0; t < x.shape[1]; ++t) {
      const double* v = x.values.data() + (b * x.shape[1] + t) * 2;
      steps.push_back({v[0], v[1]});
    }
    rows.push_back(steps);
  }
  return rows;
}

// Keras models whose SavedModel signature TensorFlow wrote (tests/fixtures/tfserving/
// make_fixtures.py): the same model's .h5 must show the same serving_default signature.
constexpr const char* kSignatureCases[] = {"Keras2SequentialLstmSignature",
                                           "Keras2FunctionalTwoOutputsSignature"};

class TfServingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // One directory per process: ctest runs each test case in a process of its own, in
    // parallel.
    root_ = std::filesystem::path(::testing::TempDir()) /
            ("tfserving_test_" + std::to_string(getpid()));
    const std::filesystem::path& root = root_;
    std::filesystem::remove_all(root);
    CopyModel("models/examples/waveform_lstm/1/model.h5", root / "wave");
    std::filesystem::copy_file(SourcePath("models/examples/waveform_lstm/config.pbtxt"),
                               root / "wave/config.pbtxt");
    CopyModel("tests/fixtures/keras/Keras2LstmReturnState/model.h5", root / "state");
    // Two versions of the example, with TF Serving's version labels (one for a version that
    // is not there).
    CopyModel("models/examples/waveform_lstm/1/model.h5", root / "labelled");
    std::filesystem::create_directories(root / "labelled/2");
    std::filesystem::copy_file(root / "labelled/1/model.h5", root / "labelled/2/model.h5");
    std::ofstream(root / "labelled/config.pbtxt")
        << "version_policy { all {} }\n"
           "version_labels { key: \"stable\" value: 1 }\n"
           "version_labels { key: \"canary\" value: 2 }\n"
           "version_labels { key: \"retired\" value: 7 }\n";
    for (const char* c : kSignatureCases) {
      CopyModel(std::string("tests/fixtures/tfserving/") + c + "/model.h5", root / c);
    }
    auto repository = server::ModelRepository::Open(root.string());
    ASSERT_TRUE(repository.ok()) << repository.status();
    repository_ = std::move(*repository).release();
  }
  static void TearDownTestSuite() {
    delete repository_;
    repository_ = nullptr;
    std::filesystem::remove_all(root_);
  }

  RestAnswer Rest(const std::string& method, const std::string& path,
                  const std::string& body = "") {
    server::http::Request request{.method = method, .path = path, .body = body};
    server::auth::Access access = server::auth::Access::kPublic;
    EXPECT_TRUE(routes_.Owns(request, &access)) << path;
    EXPECT_EQ(access, server::auth::Access::kInference);
    std::promise<server::http::Response> answer;
    routes_.Handle(request, [&answer](server::http::Response r) { answer.set_value(r); });
    server::http::Response r = answer.get_future().get();
    RestAnswer out{r.status, r.body, Json::parse(r.body, nullptr, false)};
    EXPECT_FALSE(out.json.is_discarded()) << r.body;
    return out;
  }

  static std::filesystem::path root_;
  static server::ModelRepository* repository_;
  RestRoutes routes_{repository_, {}};
  PredictionService prediction_{repository_, {}};
  ModelService models_{repository_, {}};
  const client::NpyArray x_ = LoadNpy("tests/fixtures/example/input.npy");
  const client::NpyArray want_ = LoadNpy("tests/fixtures/example/expected.npy");
};
std::filesystem::path TfServingTest::root_;
server::ModelRepository* TfServingTest::repository_ = nullptr;

// The example's input as a Predict request: tensor_content or float_val.
ts::PredictRequest WaveRequest(const client::NpyArray& x, bool content) {
  ts::PredictRequest request;
  request.mutable_model_spec()->set_name("wave");
  tensorflow::TensorProto& t = (*request.mutable_inputs())["waveform"];
  t.set_dtype(tensorflow::DT_FLOAT);
  for (int64_t d : x.shape) t.mutable_tensor_shape()->add_dim()->set_size(d);
  std::vector<float> values(x.values.begin(), x.values.end());
  if (content) {
    t.set_tensor_content(
        std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  } else {
    t.mutable_float_val()->Add(values.begin(), values.end());
  }
  return request;
}

// --- TensorProto codec ---

TEST(TfServingTensorProtoTest, TensorContentIsViewedNotCopied) {
  tensorflow::TensorProto t;
  t.set_dtype(tensorflow::DT_FLOAT);
  t.mutable_tensor_shape()->add_dim()->set_size(2);
  const float v[2] = {1.5f, -2.0f};
  t.set_tensor_content(std::string(reinterpret_cast<const char*>(v), sizeof(v)));
  auto view = server::tfserving::ViewOf("x", t);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->bytes.data(), t.tensor_content().data());
  EXPECT_EQ(view->type, server::core::ElementType::kFp32);
  EXPECT_EQ(view->shape, (engine::Shape{2}));
}

TEST(TfServingTensorProtoTest, TypedFieldsAreViewedNotCopied) {
  tensorflow::TensorProto t;
  t.set_dtype(tensorflow::DT_INT64);
  t.mutable_tensor_shape()->add_dim()->set_size(3);
  t.add_int64_val(4);
  t.add_int64_val(5);
  t.add_int64_val(6);
  auto view = server::tfserving::ViewOf("ids", t);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->bytes.data(), reinterpret_cast<const char*>(t.int64_val().data()));
  EXPECT_EQ(view->bytes.size(), 3 * sizeof(int64_t));
  EXPECT_EQ(view->type, server::core::ElementType::kInt64);
}

TEST(TfServingTensorProtoTest, BadTensorsAreInvalidArgumentNamingTheInput) {
  tensorflow::TensorProto strings;
  strings.set_dtype(tensorflow::DT_STRING);
  strings.add_string_val("a");
  auto s = server::tfserving::ViewOf("words", strings).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("input 'words': dtype DT_STRING"));

  tensorflow::TensorProto half;
  half.set_dtype(tensorflow::DT_HALF);
  half.add_half_val(0x3c00);
  s = server::tfserving::ViewOf("x", half).status();
  EXPECT_THAT(s.message(), HasSubstr("half_val are not read; send them as tensor_content"));

  tensorflow::TensorProto unknown_rank;
  unknown_rank.set_dtype(tensorflow::DT_FLOAT);
  unknown_rank.mutable_tensor_shape()->set_unknown_rank(true);
  s = server::tfserving::ViewOf("x", unknown_rank).status();
  EXPECT_THAT(s.message(), HasSubstr("unknown_rank"));

  tensorflow::TensorProto negative;
  negative.set_dtype(tensorflow::DT_FLOAT);
  negative.mutable_tensor_shape()->add_dim()->set_size(-1);
  s = server::tfserving::ViewOf("x", negative).status();
  EXPECT_THAT(s.message(), HasSubstr("dimension -1"));
}

TEST(TfServingTensorProtoTest, AllocatedOutputIsEncodedInPlace) {
  tensorflow::TensorProto t;
  engine::Tensor out = server::tfserving::Allocate(engine::DType::kFloat32, {2, 3}, &t);
  for (int i = 0; i < 6; ++i) out.f32()[i] = static_cast<float>(i);
  const float* before = t.float_val().data();
  server::tfserving::Encode(out, &t);
  EXPECT_EQ(t.float_val().data(), before);
  EXPECT_EQ(t.dtype(), tensorflow::DT_FLOAT);
  ASSERT_EQ(t.tensor_shape().dim_size(), 2);
  EXPECT_EQ(t.tensor_shape().dim(1).size(), 3);
  EXPECT_EQ(t.float_val(5), 5.0f);
}

// --- gRPC ---

TEST_F(TfServingTest, PredictTensorContentMatchesKeras) {
  const ts::PredictRequest request = WaveRequest(x_, /*content=*/true);
  ts::PredictResponse response;
  const grpc::Status s = CallAndWait(
      [&](grpc::CallbackServerContext* c) { prediction_.Predict(c, &request, &response); });
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(AllClose(AsTensor(response, "probabilities"), want_));
  EXPECT_EQ(response.model_spec().name(), "wave");
  EXPECT_EQ(response.model_spec().version().value(), 1);
  EXPECT_EQ(response.model_spec().signature_name(), "serving_default");
}

TEST_F(TfServingTest, PredictFloatValMatchesKeras) {
  ts::PredictRequest request = WaveRequest(x_, /*content=*/false);
  request.mutable_model_spec()->mutable_version()->set_value(1);
  request.mutable_model_spec()->set_signature_name("serving_default");
  ts::PredictResponse response;
  const grpc::Status s = CallAndWait(
      [&](grpc::CallbackServerContext* c) { prediction_.Predict(c, &request, &response); });
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(AllClose(AsTensor(response, "probabilities"), want_));
}

TEST_F(TfServingTest, PredictOutputFilterReturnsOnlyThoseOutputs) {
  ts::PredictRequest request;
  request.mutable_model_spec()->set_name("state");
  const client::NpyArray in = LoadNpy("tests/fixtures/keras/Keras2LstmReturnState/input_0.npy");
  tensorflow::TensorProto& t = (*request.mutable_inputs())["x"];
  t.set_dtype(tensorflow::DT_FLOAT);
  for (int64_t d : in.shape) t.mutable_tensor_shape()->add_dim()->set_size(d);
  for (double v : in.values) t.add_float_val(static_cast<float>(v));
  const server::Servable& model = **repository_->Get("state", 0);
  ASSERT_EQ(model.outputs().size(), 3u);
  request.add_output_filter(model.outputs()[1].name);
  ts::PredictResponse response;
  const grpc::Status s = CallAndWait(
      [&](grpc::CallbackServerContext* c) { prediction_.Predict(c, &request, &response); });
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(response.outputs().size(), 1u);
  EXPECT_TRUE(AllClose(AsTensor(response, model.outputs()[1].name),
                       LoadNpy("tests/fixtures/keras/Keras2LstmReturnState/expected_1.npy")));
}

TEST_F(TfServingTest, PredictErrorsNameWhatWasExpected) {
  struct Case {
    std::string name;
    std::function<void(ts::PredictRequest*)> change;
    grpc::StatusCode code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"UnknownSignature",
       [](ts::PredictRequest* r) { r->mutable_model_spec()->set_signature_name("classify"); },
       grpc::StatusCode::INVALID_ARGUMENT, "\"classify\" not found in signature def"},
      {"UnknownModel", [](ts::PredictRequest* r) { r->mutable_model_spec()->set_name("nope"); },
       grpc::StatusCode::NOT_FOUND, "nope"},
      {"UnknownVersion",
       [](ts::PredictRequest* r) { r->mutable_model_spec()->mutable_version()->set_value(7); },
       grpc::StatusCode::NOT_FOUND, "7"},
      {"VersionLabel",
       [](ts::PredictRequest* r) { r->mutable_model_spec()->set_version_label("stable"); },
       grpc::StatusCode::INVALID_ARGUMENT, "Unrecognized servable version label: stable"},
      {"DoubleForFloat",
       [](ts::PredictRequest* r) {
         tensorflow::TensorProto& t = r->mutable_inputs()->at("waveform");
         t.set_dtype(tensorflow::DT_DOUBLE);
         t.clear_tensor_content();
         for (int i = 0; i < 3 * 40 * 2; ++i) t.add_double_val(0.5);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "TYPE_FP64"},
      {"WrongShape",
       [](ts::PredictRequest* r) {
         r->mutable_inputs()->at("waveform").mutable_tensor_shape()->mutable_dim(2)->set_size(3);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "waveform"},
      {"UnknownOutputInFilter", [](ts::PredictRequest* r) { r->add_output_filter("nope"); },
       grpc::StatusCode::INVALID_ARGUMENT, "nope"},
  };
  for (const Case& c : cases) {
    ts::PredictRequest request = WaveRequest(x_, /*content=*/true);
    c.change(&request);
    ts::PredictResponse response;
    const grpc::Status s = CallAndWait(
        [&](grpc::CallbackServerContext* ctx) { prediction_.Predict(ctx, &request, &response); });
    EXPECT_EQ(s.error_code(), c.code) << c.name << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(c.says)) << c.name;
  }
}

TEST_F(TfServingTest, GetModelMetadataHasServingDefaultSignature) {
  ts::GetModelMetadataRequest request;
  request.mutable_model_spec()->set_name("wave");
  request.add_metadata_field("signature_def");
  ts::GetModelMetadataResponse response;
  grpc::ServerContext context;
  ASSERT_TRUE(prediction_.GetModelMetadata(&context, &request, &response).ok());
  ts::SignatureDefMap map;
  ASSERT_TRUE(response.metadata().at("signature_def").UnpackTo(&map));
  const tensorflow::SignatureDef& sig = map.signature_def().at("serving_default");
  EXPECT_EQ(sig.method_name(), "tensorflow/serving/predict");
  const tensorflow::TensorInfo& in = sig.inputs().at("waveform");
  EXPECT_EQ(in.name(), "serving_default_waveform:0");
  EXPECT_EQ(in.dtype(), tensorflow::DT_FLOAT);
  ASSERT_EQ(in.tensor_shape().dim_size(), 3);
  EXPECT_EQ(in.tensor_shape().dim(0).size(), -1);
  EXPECT_EQ(in.tensor_shape().dim(2).size(), 2);
  EXPECT_EQ(sig.outputs().at("probabilities").name(), "StatefulPartitionedCall:0");
  EXPECT_EQ(response.model_spec().version().value(), 1);

  request.add_metadata_field("other");
  EXPECT_EQ(prediction_.GetModelMetadata(&context, &request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(TfServingTest, GetModelStatusListsAvailableVersions) {
  ts::GetModelStatusRequest request;
  request.mutable_model_spec()->set_name("wave");
  ts::GetModelStatusResponse response;
  grpc::ServerContext context;
  ASSERT_TRUE(models_.GetModelStatus(&context, &request, &response).ok());
  ASSERT_EQ(response.model_version_status_size(), 1);
  EXPECT_EQ(response.model_version_status(0).version(), 1);
  EXPECT_EQ(response.model_version_status(0).state(), ts::ModelVersionStatus::AVAILABLE);
  EXPECT_EQ(response.model_version_status(0).status().error_code(), tensorflow::error::OK);

  request.mutable_model_spec()->mutable_version()->set_value(2);
  const grpc::Status s = models_.GetModelStatus(&context, &request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "Could not find version 2 of model wave");
}

TEST_F(TfServingTest, UnservedRpcsSayWhatToUseInstead) {
  grpc::ServerContext context;
  ts::ClassificationRequest c;
  ts::ClassificationResponse cr;
  grpc::Status s = prediction_.Classify(&context, &c, &cr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(s.error_message(), HasSubstr("Predict"));
  ts::ReloadConfigRequest r;
  ts::ReloadConfigResponse rr;
  s = models_.HandleReloadConfigRequest(&context, &r, &rr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(s.error_message(), HasSubstr("--model-repository"));
}

TEST_F(TfServingTest, SignatureMatchesTensorFlowsSavedModel) {
  for (const char* c : kSignatureCases) {
    auto model = repository_->Get(c, 0);
    ASSERT_TRUE(model.ok()) << model.status();
    const ts::SignatureDefMap map = server::tfserving::SignatureDefsOf(**model);
    std::string ours;
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    ASSERT_TRUE(google::protobuf::util::MessageToJsonString(
                    map.signature_def().at("serving_default"), &ours, options)
                    .ok());
    std::ifstream f(SourcePath(std::string("tests/fixtures/tfserving/") + c + "/signature.json"));
    const Json tensorflow = Json::parse(f);
    EXPECT_EQ(Json::parse(ours), tensorflow) << c << ": ours " << ours;
  }
}

// --- REST ---

TEST_F(TfServingTest, RestRowFormatMatchesKeras) {
  const Json body = {{"instances", InputJson(x_)}};
  const RestAnswer a = Rest("POST", "/v1/models/wave:predict", body.dump());
  ASSERT_EQ(a.status, 200) << a.body;
  // One output: a list of rows, not a map.
  ASSERT_TRUE(a.json["predictions"].is_array()) << a.body;
  EXPECT_TRUE(AllClose(AsTensor(a.json["predictions"]), want_));
}

TEST_F(TfServingTest, RestNamedInstancesAndVersionMatchKeras) {
  Json rows = Json::array();
  for (const Json& r : InputJson(x_)) rows.push_back({{"waveform", r}});
  const Json body = {{"signature_name", "serving_default"}, {"instances", rows}};
  const RestAnswer a = Rest("POST", "/v1/models/wave/versions/1:predict", body.dump());
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_TRUE(AllClose(AsTensor(a.json["predictions"]), want_));
}

TEST_F(TfServingTest, RestColumnarFormatMatchesKeras) {
  const Json body = {{"inputs", {{"waveform", InputJson(x_)}}}};
  const RestAnswer a = Rest("POST", "/v1/models/wave:predict", body.dump());
  ASSERT_EQ(a.status, 200) << a.body;
  ASSERT_TRUE(a.json["outputs"].is_array()) << a.body;
  EXPECT_TRUE(AllClose(AsTensor(a.json["outputs"]), want_));
  const RestAnswer bare =
      Rest("POST", "/v1/models/wave:predict", Json({{"inputs", InputJson(x_)}}).dump());
  ASSERT_EQ(bare.status, 200) << bare.body;
  EXPECT_TRUE(AllClose(AsTensor(bare.json["outputs"]), want_));
}

TEST_F(TfServingTest, RestSeveralOutputsAreKeyedByName) {
  const std::string dir = "tests/fixtures/keras/Keras2LstmReturnState/";
  const client::NpyArray in = LoadNpy(dir + "input_0.npy");
  ASSERT_EQ(in.shape.size(), 3u);
  Json rows = Json::array();
  for (int64_t b = 0; b < in.shape[0]; ++b) {
    Json steps = Json::array();
    for (int64_t t = 0; t < in.shape[1]; ++t) {
      Json step = Json::array();
      for (int64_t f = 0; f < in.shape[2]; ++f) {
        step.push_back(in.values[(b * in.shape[1] + t) * in.shape[2] + f]);
      }
      steps.push_back(step);
    }
    rows.push_back(steps);
  }
  const server::Servable& model = **repository_->Get("state", 0);
  const RestAnswer columnar =
      Rest("POST", "/v1/models/state:predict", Json({{"inputs", rows}}).dump());
  ASSERT_EQ(columnar.status, 200) << columnar.body;
  const RestAnswer row =
      Rest("POST", "/v1/models/state:predict", Json({{"instances", rows}}).dump());
  ASSERT_EQ(row.status, 200) << row.body;
  ASSERT_EQ(row.json["predictions"].size(), static_cast<size_t>(in.shape[0]));
  for (int i = 0; i < 3; ++i) {
    const std::string& name = model.outputs()[i].name;
    const client::NpyArray want = LoadNpy(dir + "expected_" + std::to_string(i) + ".npy");
    EXPECT_TRUE(AllClose(AsTensor(columnar.json["outputs"][name]), want)) << name;
    Json per_row = Json::array();
    for (const Json& r : row.json["predictions"]) per_row.push_back(r[name]);
    EXPECT_TRUE(AllClose(AsTensor(per_row), want)) << name;
  }
}

TEST_F(TfServingTest, RestBadRequestsGetTfServingCodesAndSayWhy) {
  const Json good_rows = InputJson(x_);
  Json ragged = good_rows;
  ragged[1].erase(ragged[1].begin());
  Json ragged_step = good_rows;
  ragged_step[0][3].push_back(1.0);
  struct Case {
    std::string name, method, path, body;
    int status;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"MalformedJson", "POST", "/v1/models/wave:predict", "{\"instances\": [", 400,
       "JSON Parse error"},
      {"NotAnObject", "POST", "/v1/models/wave:predict", "[1, 2]", 400, "object"},
      {"NeitherKey", "POST", "/v1/models/wave:predict", "{}", 400,
       "Missing 'inputs' or 'instances' key"},
      {"BothKeys", "POST", "/v1/models/wave:predict",
       Json({{"inputs", good_rows}, {"instances", good_rows}}).dump(), 400, "only one of"},
      {"RaggedInstances", "POST", "/v1/models/wave:predict", Json({{"instances", ragged}}).dump(),
       400, "input 'waveform' of instance 1"},
      {"RaggedStep", "POST", "/v1/models/wave:predict", Json({{"inputs", ragged_step}}).dump(), 400,
       "ragged"},
      {"StringForFloat", "POST", "/v1/models/wave:predict", R"({"instances": [[["a", 1.0]]]})", 400,
       "is not a number (DT_FLOAT)"},
      {"Bytes", "POST", "/v1/models/wave:predict", R"({"instances": [{"b64": "AAAA"}]})", 400,
       "carries bytes"},
      {"WrongShape", "POST", "/v1/models/wave:predict", R"({"instances": [[[1.0, 2.0, 3.0]]]})",
       400, "waveform"},
      {"UnknownSignature", "POST", "/v1/models/wave:predict",
       Json({{"signature_name", "predict"}, {"instances", good_rows}}).dump(), 400,
       "\"predict\" not found in signature def"},
      {"UnknownModel", "POST", "/v1/models/nope:predict", Json({{"instances", good_rows}}).dump(),
       404, "nope"},
      {"UnknownVersion", "POST", "/v1/models/wave/versions/3:predict",
       Json({{"instances", good_rows}}).dump(), 404, "3"},
      {"Label", "POST", "/v1/models/wave/labels/canary:predict",
       Json({{"instances", good_rows}}).dump(), 400, "Unrecognized servable version label: canary"},
      {"NonNumericVersion", "GET", "/v1/models/wave/versions/x", "", 400,
       "Failed to convert version: x"},
      {"UnknownModelStatus", "GET", "/v1/models/nope", "", 404,
       "Could not find any versions of model nope"},
      {"UnknownVersionStatus", "GET", "/v1/models/wave/versions/2", "", 404,
       "Could not find version 2 of model wave"},
      {"UnknownModelMetadata", "GET", "/v1/models/nope/metadata", "", 404, "nope"},
      {"GetPredict", "GET", "/v1/models/wave:predict", "", 400,
       "Malformed request: GET /v1/models/wave:predict"},
      {"Classify", "POST", "/v1/models/wave:classify", "{}", 501, ":predict"},
      {"NoModel", "GET", "/v1/models/", "", 400, "Malformed request"},
      {"DeepNesting", "POST", "/v1/models/wave:predict",
       "{\"inputs\": " + std::string(100000, '[') + std::string(100000, ']') + "}", 400,
       "nested deeper than"},
      {"InvalidUtf8Path", "GET", "/v1/\xff\xfe", "", 400, "Malformed request: GET /v1/"},
      {"OtherPath", "GET", "/v1/other", "", 400, "Malformed request"},
  };
  for (const Case& c : cases) {
    const RestAnswer a = Rest(c.method, c.path, c.body);
    EXPECT_EQ(a.status, c.status) << c.name << ": " << a.body;
    ASSERT_TRUE(a.json.is_object() && a.json.contains("error")) << c.name << ": " << a.body;
    EXPECT_THAT(a.json["error"].get<std::string>(), HasSubstr(c.says)) << c.name;
  }
}

TEST_F(TfServingTest, VersionLabelsNameTheConfiguredVersions) {
  for (const auto& [label, version] : {std::pair{"stable", 1}, std::pair{"canary", 2}}) {
    ts::PredictRequest request = WaveRequest(x_, /*content=*/true);
    request.mutable_model_spec()->set_name("labelled");
    request.mutable_model_spec()->set_version_label(label);
    ts::PredictResponse response;
    const grpc::Status s = CallAndWait(
        [&](grpc::CallbackServerContext* c) { prediction_.Predict(c, &request, &response); });
    ASSERT_TRUE(s.ok()) << label << ": " << s.error_message();
    EXPECT_EQ(response.model_spec().version().value(), version) << label;
    EXPECT_TRUE(AllClose(AsTensor(response, "probabilities"), want_)) << label;

    const RestAnswer status = Rest("GET", std::string("/v1/models/labelled/labels/") + label);
    ASSERT_EQ(status.status, 200) << status.body;
    ASSERT_EQ(status.json["model_version_status"].size(), 1u) << status.body;
    EXPECT_EQ(status.json["model_version_status"][0]["version"], std::to_string(version));
    const RestAnswer metadata =
        Rest("GET", std::string("/v1/models/labelled/labels/") + label + "/metadata");
    EXPECT_EQ(metadata.json["model_spec"]["version"], std::to_string(version)) << metadata.body;
    const RestAnswer predict =
        Rest("POST", std::string("/v1/models/labelled/labels/") + label + ":predict",
             Json({{"instances", InputJson(x_)}}).dump());
    ASSERT_EQ(predict.status, 200) << predict.body;
    EXPECT_TRUE(AllClose(AsTensor(predict.json["predictions"]), want_)) << label;
  }
  const RestAnswer unknown = Rest("GET", "/v1/models/labelled/labels/beta");
  EXPECT_EQ(unknown.status, 400) << unknown.body;
  EXPECT_THAT(unknown.body, HasSubstr("Unrecognized servable version label: beta"));
  EXPECT_THAT(unknown.body, HasSubstr("canary, retired, stable"));
  const RestAnswer retired = Rest("POST", "/v1/models/labelled/labels/retired:predict",
                                  Json({{"instances", InputJson(x_)}}).dump());
  EXPECT_EQ(retired.status, 404) << retired.body;
  EXPECT_THAT(retired.body, HasSubstr("7"));
}

TEST_F(TfServingTest, RestStatusIsTfServingsJson) {
  const RestAnswer a = Rest("GET", "/v1/models/wave");
  ASSERT_EQ(a.status, 200) << a.body;
  const Json want = Json::parse(R"({"model_version_status": [{"version": "1", "state": "AVAILABLE",
      "status": {"error_code": "OK", "error_message": ""}}]})");
  EXPECT_EQ(a.json, want) << a.body;
  EXPECT_EQ(Rest("GET", "/v1/models/wave/versions/1").json, want);
}

TEST_F(TfServingTest, RestMetadataIsTfServingsJson) {
  const RestAnswer a = Rest("GET", "/v1/models/wave/versions/1/metadata");
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.json["model_spec"],
            Json::parse(R"({"name": "wave", "signature_name": "", "version": "1"})"));
  const Json& sig = a.json["metadata"]["signature_def"]["signature_def"]["serving_default"];
  EXPECT_EQ(sig["method_name"], "tensorflow/serving/predict");
  EXPECT_EQ(sig["inputs"]["waveform"], Json::parse(R"({"dtype": "DT_FLOAT",
      "tensor_shape": {"dim": [{"size": "-1", "name": ""}, {"size": "-1", "name": ""},
                               {"size": "2", "name": ""}], "unknown_rank": false},
      "name": "serving_default_waveform:0"})"));
  EXPECT_EQ(sig["outputs"]["probabilities"]["name"], "StatefulPartitionedCall:0");
  EXPECT_EQ(Rest("GET", "/v1/models/wave/metadata").json, a.json);
}

TEST_F(TfServingTest, RestOwnsOnlyV1Paths) {
  server::auth::Access access = server::auth::Access::kPublic;
  EXPECT_FALSE(routes_.Owns({.method = "GET", .path = "/v2/models/wave"}, &access));
  EXPECT_FALSE(routes_.Owns({.method = "GET", .path = "/metrics"}, &access));
}

TEST(TfServingJsonTest, ErrorBodyEscapesTheMessage) {
  EXPECT_EQ(server::tfserving::JsonError("a \"quoted\" name"), R"({"error":"a \"quoted\" name"})");
}

}  // namespace
}  // namespace rnnserve::testing
