// The ONNX importer's contract on files built here with the ONNX protobuf: bad files give load
// errors naming the file and the problem (never a crash, never a half-loaded model), gate
// orders convert to the canonical layout, constant subgraphs fold at load, unsupported ops are
// named with node, op type and opset.

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "engine/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/model_loader.h"
#include "models/onnx/onnx.pb.h"
#include "models/onnx/onnx_model.h"
#include "tests/support/fixtures.h"

namespace rnnserve {
namespace {

namespace onnx = models::onnx;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int kT = 3, kB = 2, kI = 3, kH = 4;

void AddFloatInitializer(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims,
                         std::mt19937* rng) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    n *= d;
  }
  std::normal_distribution<float> dist(0.0f, 0.5f);
  for (int64_t i = 0; i < n; ++i) t->add_float_data(dist(*rng));
}

void AddValueInfo(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list,
                  const std::string& name, int elem_type = onnx::TensorProto::FLOAT) {
  onnx::ValueInfoProto* v = list->Add();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(elem_type);
}

// X [T, B, I] -> LSTM (random weights, peepholes) -> Y_h [1, B, H].
onnx::ModelProto LstmModel() {
  std::mt19937 rng(7);
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("onnx_import_test");
  onnx::OperatorSetIdProto* op = m.add_opset_import();
  op->set_version(14);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("lstm");
  AddValueInfo(g->mutable_input(), "X");
  AddValueInfo(g->mutable_output(), "Y_h");
  AddFloatInitializer(g, "W", {1, 4 * kH, kI}, &rng);
  AddFloatInitializer(g, "R", {1, 4 * kH, kH}, &rng);
  AddFloatInitializer(g, "B", {1, 8 * kH}, &rng);
  AddFloatInitializer(g, "P", {1, 3 * kH}, &rng);
  onnx::NodeProto* n = g->add_node();
  n->set_name("lstm_node");
  n->set_op_type("LSTM");
  for (const char* in : {"X", "W", "R", "B", "", "", "", "P"}) n->add_input(in);
  for (const char* out : {"", "Y_h"}) n->add_output(out);
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name("hidden_size");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(kH);
  return m;
}

onnx::TensorProto* Initializer(onnx::ModelProto* m, const std::string& name) {
  for (auto& t : *m->mutable_graph()->mutable_initializer()) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

absl::Status LoadError(const onnx::ModelProto& m) {
  return onnx::LoadOnnxBytes(m.SerializeAsString(), "bad.onnx").status();
}

TEST(OnnxImport, ValidLstmLoadsAndRuns) {
  auto model = onnx::LoadOnnxBytes(LstmModel().SerializeAsString(), "lstm.onnx");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->source_format, "onnx");
  auto engine = engine::Engine::Create({});
  auto compiled = (*engine)->Compile(*model, {});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  engine::Batch batch;
  batch.inputs.push_back(engine::Tensor::Float({kT, kB, kI}));
  std::vector<engine::Tensor> out;
  ASSERT_TRUE((*compiled)->Run(batch, &out).ok());
  EXPECT_EQ(out[0].shape(), (engine::Shape{1, kB, kH}));
}

TEST(OnnxImport, LstmGatesAndPeepholesConvertToCanonicalOrder) {
  const onnx::ModelProto m = LstmModel();
  auto model = onnx::LoadOnnxBytes(m.SerializeAsString(), "lstm.onnx");
  ASSERT_TRUE(model.ok()) << model.status();
  const engine::RecurrentSpec* rnn = nullptr;
  for (const auto& layer : model->layers) {
    if (auto* r = std::get_if<engine::RecurrentSpec>(&layer.spec)) rnn = r;
  }
  ASSERT_NE(rnn, nullptr);
  EXPECT_EQ(rnn->masking, engine::MaskSemantics::kOnnx);
  const auto& dir = rnn->directions[0];
  const auto* W = Initializer(const_cast<onnx::ModelProto*>(&m), "W");
  const auto* P = Initializer(const_cast<onnx::ModelProto*>(&m), "P");
  // ONNX rows i, o, f, c -> canonical i, f, g(c), o; peepholes i, o, f -> i, f, o.
  const int onnx_block_of[4] = {0, 2, 3, 1};
  for (int gate = 0; gate < 4; ++gate) {
    for (int k = 0; k < kH * kI; ++k) {
      ASSERT_EQ(dir.W[gate * kH * kI + k], W->float_data(onnx_block_of[gate] * kH * kI + k))
          << "gate " << gate;
    }
  }
  const int peep_block_of[3] = {0, 2, 1};
  for (int gate = 0; gate < 3; ++gate) {
    for (int j = 0; j < kH; ++j) {
      ASSERT_EQ(dir.peephole[gate * kH + j], P->float_data(peep_block_of[gate] * kH + j));
    }
  }
}

TEST(OnnxImport, EmptyFileIsALoadError) {
  EXPECT_THAT(onnx::LoadOnnxBytes("", "empty.onnx").status().message(),
              AllOf(HasSubstr("empty.onnx"), HasSubstr("empty")));
}

TEST(OnnxImport, TruncatedFilesAreLoadErrors) {
  const std::string bytes = LstmModel().SerializeAsString();
  for (size_t len = 1; len < bytes.size(); len += 5) {
    auto model = onnx::LoadOnnxBytes(bytes.substr(0, len), "cut.onnx");
    ASSERT_FALSE(model.ok()) << "prefix of " << len << " bytes loaded";
    EXPECT_THAT(model.status().message(), HasSubstr("cut.onnx"));
  }
}

TEST(OnnxImport, Hdf5MagicIsNamedAsTheWrongFormat) {
  auto s = onnx::LoadOnnxBytes(std::string("\x89HDF\r\n\x1a\n\0\0\0\0", 12), "keras.onnx");
  EXPECT_THAT(s.status().message(), AllOf(HasSubstr("keras.onnx"), HasSubstr("HDF5")));
}

TEST(OnnxImport, GarbageIsALoadError) {
  std::mt19937 rng(1);
  for (int trial = 0; trial < 50; ++trial) {
    std::string bytes(64 + trial * 13, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    auto model = onnx::LoadOnnxBytes(bytes, "garbage.onnx");
    ASSERT_FALSE(model.ok());
    EXPECT_THAT(model.status().message(), HasSubstr("garbage.onnx"));
  }
}

TEST(OnnxImport, MissingInitializerNamesTheTensor) {
  onnx::ModelProto m = LstmModel();
  auto* inits = m.mutable_graph()->mutable_initializer();
  inits->erase(inits->begin() + 1);  // R
  EXPECT_THAT(LoadError(m).message(),
              AllOf(HasSubstr("bad.onnx"), HasSubstr("'R'"), HasSubstr("lstm_node")));
}

TEST(OnnxImport, WeightShapeMismatchNamesTheExpectedShape) {
  onnx::ModelProto m = LstmModel();
  Initializer(&m, "R")->set_dims(2, kH + 1);
  Initializer(&m, "R")->add_float_data(0.0f);
  for (int i = 1; i < 4 * kH; ++i) Initializer(&m, "R")->add_float_data(0.0f);
  EXPECT_THAT(LoadError(m).message(), AllOf(HasSubstr("R is [1,16,5]"), HasSubstr("expected")));
}

TEST(OnnxImport, DataSizeMismatchIsALoadError) {
  onnx::ModelProto m = LstmModel();
  Initializer(&m, "B")->mutable_float_data()->RemoveLast();
  EXPECT_THAT(LoadError(m).message(),
              AllOf(HasSubstr("initializer 'B'"), HasSubstr("declares 32 elements")));
}

TEST(OnnxImport, NanWeightsAreALoadError) {
  onnx::ModelProto m = LstmModel();
  Initializer(&m, "W")->set_float_data(5, std::nanf(""));
  EXPECT_THAT(LoadError(m).message(), AllOf(HasSubstr("initializer 'W'"), HasSubstr("NaN")));
}

TEST(OnnxImport, InfiniteRecurrentWeightsAreALoadError) {
  onnx::ModelProto m = LstmModel();
  Initializer(&m, "R")->set_float_data(3, INFINITY);
  EXPECT_THAT(LoadError(m).message(), HasSubstr("R holds NaN or infinite values"));
}

TEST(OnnxImport, HugeDeclaredSizeIsRejectedBeforeAllocating) {
  onnx::ModelProto m = LstmModel();
  onnx::TensorProto* w = Initializer(&m, "W");
  w->clear_float_data();
  w->set_dims(0, int64_t{1} << 40);
  EXPECT_THAT(LoadError(m).message(),
              AllOf(HasSubstr("initializer 'W'"), HasSubstr("declares more than")));
}

TEST(OnnxImport, HugeRawDataClaimIsALoadError) {
  onnx::ModelProto m = LstmModel();
  onnx::TensorProto* w = Initializer(&m, "W");
  w->clear_float_data();
  w->set_raw_data(std::string(12, '\0'));
  EXPECT_THAT(LoadError(m).message(), HasSubstr("raw_data holds 12 bytes"));
}

TEST(OnnxImport, ExternalDataIsRejectedWithAClearError) {
  onnx::ModelProto m = LstmModel();
  onnx::TensorProto* w = Initializer(&m, "W");
  w->clear_float_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = w->add_external_data();
  e->set_key("location");
  e->set_value("weights.bin");
  EXPECT_THAT(LoadError(m).message(), AllOf(HasSubstr("'W'"), HasSubstr("external")));
}

TEST(OnnxImport, UnsupportedOpIsNamedWithNodeOpTypeAndOpset) {
  onnx::ModelProto m = LstmModel();
  onnx::NodeProto* n = m.mutable_graph()->add_node();
  n->set_name("nms");
  n->set_op_type("NonMaxSuppression");
  n->add_input("Y_h");
  n->add_output("boxes");
  EXPECT_THAT(LoadError(m).message(),
              AllOf(HasSubstr("'nms'"), HasSubstr("NonMaxSuppression"), HasSubstr("opset 14")));
}

TEST(OnnxImport, CustomDomainOpIsRejected) {
  onnx::ModelProto m = LstmModel();
  onnx::NodeProto* n = m.mutable_graph()->add_node();
  n->set_op_type("FusedGemm");
  n->set_domain("com.microsoft");
  n->add_input("Y_h");
  n->add_output("z");
  EXPECT_THAT(LoadError(m).message(), HasSubstr("domain 'com.microsoft'"));
}

TEST(OnnxImport, MissingOpsetIsALoadError) {
  onnx::ModelProto m = LstmModel();
  m.clear_opset_import();
  EXPECT_THAT(LoadError(m).message(), HasSubstr("opset"));
}

TEST(OnnxImport, WrongActivationCountIsALoadError) {
  onnx::ModelProto m = LstmModel();
  onnx::AttributeProto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name("activations");
  a->add_strings("Sigmoid");
  EXPECT_THAT(LoadError(m).message(), HasSubstr("expected 3 (3 per direction)"));
}

TEST(OnnxImport, UnknownActivationIsALoadError) {
  onnx::ModelProto m = LstmModel();
  onnx::AttributeProto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name("activations");
  for (const char* s : {"Sigmoid", "Swoosh", "Tanh"}) a->add_strings(s);
  EXPECT_THAT(LoadError(m).message(), HasSubstr("activation 'Swoosh'"));
}

TEST(OnnxImport, ConstantSubgraphsFoldAtLoad) {
  // Y = X + (Shape-free constant arithmetic: Cast(Add(c1, c2))) : one runtime layer remains.
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  AddValueInfo(g->mutable_input(), "X");
  AddValueInfo(g->mutable_output(), "Y");
  std::mt19937 rng(3);
  AddFloatInitializer(g, "c1", {4}, &rng);
  AddFloatInitializer(g, "c2", {4}, &rng);
  auto add = [&](const std::string& op, std::vector<std::string> in, const std::string& out) {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(out);
    for (const auto& i : in) n->add_input(i);
    n->add_output(out);
  };
  add("Add", {"c1", "c2"}, "c3");
  add("Neg", {"c3"}, "c4");
  add("Add", {"X", "c4"}, "Y");
  auto model = onnx::LoadOnnxBytes(m.SerializeAsString(), "fold.onnx");
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(model->layers.size(), 1u);
  EXPECT_EQ(model->layers[0].name, "Y");
}

TEST(OnnxImport, WrongRequestShapeIsARunErrorNotACrash) {
  auto model = onnx::LoadOnnxBytes(LstmModel().SerializeAsString(), "lstm.onnx");
  ASSERT_TRUE(model.ok());
  auto engine = engine::Engine::Create({});
  auto compiled = (*engine)->Compile(*model, {});
  ASSERT_TRUE(compiled.ok());
  engine::Batch batch;
  batch.inputs.push_back(engine::Tensor::Float({kT, kB, kI + 1}));
  std::vector<engine::Tensor> out;
  EXPECT_FALSE((*compiled)->Run(batch, &out).ok());
  batch.inputs[0] = engine::Tensor::Float({kT, kB});
  EXPECT_FALSE((*compiled)->Run(batch, &out).ok());
}

TEST(OnnxImport, LoadModelFileNamesTheFileInErrors) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "onnx_import_test_garbage.onnx").string();
  {
    std::ofstream f(path, std::ios::binary);
    f << "definitely not protobuf \xff\xff\xff\xff";
  }
  auto model = models::LoadModelFile(path);
  std::filesystem::remove(path);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr(path));
  auto missing = models::LoadModelFile("/nonexistent/model.onnx");
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/model.onnx"));
}

}  // namespace
}  // namespace rnnserve
