// The request core (server/core/request.h) on the way from the wire to the engine and back:
// an input the engine can read as sent reaches it as a view of the request's bytes (no copy),
// and an output is copied once, from the engine's tensor into the buffer the front end
// provides. A recording engine around the CPU engine shows the pointers the engine saw.

#include <grpcpp/grpcpp.h>
#include <grpcpp/test/default_reactor_test_peer.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "server/model_repository.h"
#include "server/sequence_manager.h"
#include "server/services/kserve/infer_codec.h"
#include "server/services/kserve/kserve_service.h"
#include "server/services/kserve/rest_routes.h"
#include "server/services/rnnserve_service.h"
#include "tests/support/callback_call.h"
#include "tests/unit/batching_fake_engine.h"

namespace rnnserve::testing {
namespace {

// What the engine saw on its last call, and what it answered.
struct Record {
  absl::Mutex mu;
  const void* input = nullptr;  // batch.inputs[0]'s data
  std::vector<float> output;    // outputs[0]'s values
};

// The CPU engine's instance, recording each Run.
class RecordingModel final : public engine::CompiledModel {
 public:
  RecordingModel(std::unique_ptr<engine::CompiledModel> inner, Record* record)
      : inner_(std::move(inner)), record_(record) {}
  absl::Status Run(const engine::Batch& batch, std::vector<engine::Tensor>* outputs) override {
    const absl::Status s = inner_->Run(batch, outputs);
    absl::MutexLock lock(&record_->mu);
    record_->input = batch.inputs[0].f32();
    if (s.ok())
      record_->output.assign((*outputs)[0].f32(),
                             (*outputs)[0].f32() + (*outputs)[0].num_elements());
    return s;
  }
  std::string engine_name() const override { return inner_->engine_name(); }
  std::vector<engine::LayerPlacement> placements() const override { return inner_->placements(); }
  int64_t memory_bytes() const override { return inner_->memory_bytes(); }
  engine::Tensor NewHostTensor(engine::DType dtype, engine::Shape shape) const override {
    return inner_->NewHostTensor(dtype, std::move(shape));
  }

 private:
  const std::unique_ptr<engine::CompiledModel> inner_;
  Record* const record_;
};

class RecordingEngine final : public engine::Engine {
 public:
  RecordingEngine(std::unique_ptr<engine::Engine> inner, Record* record)
      : inner_(std::move(inner)), record_(record) {}
  absl::StatusOr<std::unique_ptr<engine::CompiledModel>> Compile(
      const engine::Model& model, const engine::CompileOptions& options) const override {
    auto compiled = inner_->Compile(model, options);
    if (!compiled.ok()) return compiled.status();
    return std::make_unique<RecordingModel>(*std::move(compiled), record_);
  }
  std::string name() const override { return inner_->name(); }

 private:
  const std::unique_ptr<engine::Engine> inner_;
  Record* const record_;
};

// The example model (a Keras LSTM, models/examples/waveform_lstm) twice: "wave" runs each
// request on the caller's thread, "wave_batched" through the dynamic batcher.
constexpr char kConfig[] = R"pb(
  platform: "keras_h5"
  max_batch_size: 64
  input {
    name: "waveform"
    data_type: TYPE_FP32
    dims: [ -1, 2 ]
  }
  output {
    name: "probabilities"
    data_type: TYPE_FP32
    dims: [ 3 ]
  }
  instance_group { kind: KIND_CPU count: 1 }
)pb";

void WriteModel(const std::filesystem::path& root, const std::string& name, bool batched) {
  std::filesystem::create_directories(root / name / "1");
  std::filesystem::copy_file(RNNSERVE_SOURCE_DIR "/models/examples/waveform_lstm/1/model.h5",
                             root / name / "1/model.h5",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(root / name / "config.pbtxt")
      << "name: \"" << name << "\"\n"
      << kConfig << (batched ? "dynamic_batching { max_queue_delay_microseconds: 100 }\n" : "");
}

// [1, T, 2] of distinct values.
std::vector<float> Waveform(int T) {
  std::vector<float> x(T * 2);
  for (int i = 0; i < T * 2; ++i) x[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
  return x;
}

class RequestCoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::filesystem::path root =
        std::filesystem::path(::testing::TempDir()) /
        // One folder per process: ctest -j runs the cases side by side.
        ("request_core_test_" + std::to_string(getpid()));
    std::filesystem::remove_all(root);
    WriteModel(root, "wave", false);
    WriteModel(root, "wave_batched", true);
    server::RepositoryOptions options;
    options.servable.engine_factory =
        [this](const engine::EngineOptions& o) -> absl::StatusOr<std::unique_ptr<engine::Engine>> {
      auto inner = engine::Engine::Create(o);
      if (!inner.ok()) return inner.status();
      return std::make_unique<RecordingEngine>(*std::move(inner), &record_);
    };
    auto repository = server::ModelRepository::Open(root.string(), options);
    ASSERT_TRUE(repository.ok()) << repository.status();
    repository_ = *std::move(repository);
    ASSERT_EQ(repository_->ready_models(), 2);
    auto sequences = server::SequenceManager::Create({});
    ASSERT_TRUE(sequences.ok());
    sequences_ = *std::move(sequences);
  }

  inference::ModelInferRequest RawInfer(const std::string& model, const std::vector<float>& x) {
    inference::ModelInferRequest request;
    request.set_model_name(model);
    auto* in = request.add_inputs();
    in->set_name("waveform");
    in->set_datatype("FP32");
    for (int64_t d : {int64_t{1}, static_cast<int64_t>(x.size() / 2), int64_t{2}}) in->add_shape(d);
    request.add_raw_input_contents()->assign(reinterpret_cast<const char*>(x.data()),
                                             x.size() * sizeof(float));
    return request;
  }

  const void* SeenInput() {
    absl::MutexLock lock(&record_.mu);
    return record_.input;
  }
  std::vector<float> EngineOutput() {
    absl::MutexLock lock(&record_.mu);
    return record_.output;
  }

  Record record_;
  std::unique_ptr<server::ModelRepository> repository_;
  std::unique_ptr<server::SequenceManager> sequences_;
};

std::vector<float> Floats(const std::string& raw) {
  std::vector<float> v(raw.size() / sizeof(float));
  std::memcpy(v.data(), raw.data(), raw.size());
  return v;
}

TEST_F(RequestCoreTest, KServeRawInputContentsReachTheEngineWithoutACopy) {
  server::kserve::KServeService kserve(repository_.get(), {});
  const inference::ModelInferRequest request = RawInfer("wave", Waveform(6));
  inference::ModelInferResponse response;
  const grpc::Status s =
      CallAndWait([&](auto* c) { return kserve.ModelInfer(c, &request, &response); });
  ASSERT_TRUE(s.ok()) << s.error_message();
  // The engine read the request's own bytes: no copy on the way in.
  EXPECT_EQ(SeenInput(), static_cast<const void*>(request.raw_input_contents(0).data()));
  // The one copy on the way out: the engine's values, in the response.
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  EXPECT_EQ(Floats(response.raw_output_contents(0)), EngineOutput());
  EXPECT_EQ(EngineOutput().size(), 3u);
}

TEST_F(RequestCoreTest, KServeTypedContentsReachTheEngineWithoutACopy) {
  server::kserve::KServeService kserve(repository_.get(), {});
  inference::ModelInferRequest request = RawInfer("wave", Waveform(4));
  const std::vector<float> x = Waveform(4);
  request.clear_raw_input_contents();
  request.mutable_inputs(0)->mutable_contents()->mutable_fp32_contents()->Add(x.begin(), x.end());
  inference::ModelInferResponse response;
  const grpc::Status s =
      CallAndWait([&](auto* c) { return kserve.ModelInfer(c, &request, &response); });
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(SeenInput(),
            static_cast<const void*>(request.inputs(0).contents().fp32_contents().data()));
  EXPECT_EQ(Floats(response.raw_output_contents(0)), EngineOutput());
}

// Over HTTP the binary tensor data extension's bytes are the input: the engine reads the HTTP
// body itself (the JSON header is padded so that the data after it is aligned).
TEST_F(RequestCoreTest, KServeRestBinaryDataReachesTheEngineWithoutACopy) {
  server::kserve::KServeService kserve(repository_.get(), {});
  server::kserve::KServeRoutes routes(&kserve);
  const std::vector<float> x = Waveform(6);
  std::string header =
      absl::StrCat(R"({"inputs": [{"name": "waveform", "shape": [1, 6, 2], "datatype": "FP32", )",
                   R"("parameters": {"binary_data_size": )", x.size() * sizeof(float), "}}]}");
  header.append((16 - header.size() % 16) % 16, ' ');
  server::http::Request request{
      .method = "POST",
      .path = "/v2/models/wave/infer",
      .headers = {{"inference-header-content-length", std::to_string(header.size())}},
      .body = header + std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4)};
  std::promise<server::http::Response> answered;
  routes.Handle(request, [&](server::http::Response r) { answered.set_value(std::move(r)); });
  const server::http::Response response = answered.get_future().get();
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_EQ(SeenInput(), static_cast<const void*>(request.body.data() + header.size()));
}

TEST_F(RequestCoreTest, PredictRawContentReachesTheEngineWithoutACopy) {
  server::RnnServeService service(repository_.get(), sequences_.get());
  const std::vector<float> x = Waveform(5);
  v1::PredictRequest request;
  request.mutable_model_spec()->set_name("wave");
  v1::Tensor& in = (*request.mutable_inputs())["waveform"];
  in.set_dtype(v1::TYPE_FP32);
  for (int64_t d : {1, 5, 2}) in.add_shape(d);
  in.set_raw_content(std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4));
  v1::PredictResponse response;
  const grpc::Status s =
      CallAndWait([&](auto* c) { return service.Predict(c, &request, &response); });
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(SeenInput(),
            static_cast<const void*>(request.inputs().at("waveform").raw_content().data()));
  const auto& out = response.outputs().at("probabilities").float_val();
  EXPECT_EQ(std::vector<float>(out.begin(), out.end()), EngineOutput());
}

// Through the dynamic batcher the request's rows are gathered into the engine's batch (the
// one copy in) and scattered straight into the response (the one copy out).
TEST_F(RequestCoreTest, KServeBatchedAnswerIsTheEngineOutput) {
  server::kserve::KServeService kserve(repository_.get(), {});
  const inference::ModelInferRequest request = RawInfer("wave_batched", Waveform(7));
  inference::ModelInferResponse response;
  const grpc::Status s =
      CallAndWait([&](auto* c) { return kserve.ModelInfer(c, &request, &response); });
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_EQ(response.outputs(0).name(), "probabilities");
  EXPECT_EQ(response.outputs(0).datatype(), "FP32");
  EXPECT_EQ(
      std::vector<int64_t>(response.outputs(0).shape().begin(), response.outputs(0).shape().end()),
      (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(Floats(response.raw_output_contents(0)), EngineOutput());
}

// The dynamic batcher writes a request's rows into the tensors RunOptions::allocate_outputs
// hands it: the answer `done` gets is the front end's buffer, filled by the one copy from
// the engine's output.
TEST(RequestCoreAllocatorTest, BatcherScattersIntoTheFrontEndsBuffers) {
  FakeEngineFactory engines;
  v1::ModelConfig config;
  config.set_name("fake");
  config.set_max_batch_size(8);
  config.mutable_dynamic_batching()->set_max_queue_delay_microseconds(100);
  config.add_instance_group()->set_kind(v1::ModelInstanceGroup::KIND_CPU);
  auto servable = server::Servable::FromModel(FakeEngineFactory::Model(), 1, config,
                                              {.engine_factory = engines.Factory()});
  ASSERT_TRUE(servable.ok()) << servable.status();
  engine::Tensor x = engine::Tensor::Float({2, 3, 2});  // [B, T, F]
  for (int64_t i = 0; i < x.num_elements(); ++i) x.f32()[i] = static_cast<float>(i + 1);
  engine::Batch batch;
  batch.inputs.push_back(x);
  std::vector<std::vector<float>> buffers(2);
  server::RunOptions options;
  options.allocate_outputs = [&buffers](int index, engine::DType dtype,
                                        const engine::Shape& shape) {
    EXPECT_EQ(dtype, engine::DType::kFloat32);
    buffers[index].assign(engine::NumElements(shape), -1.0f);
    return engine::Tensor::Wrap(dtype, shape, buffers[index].data(), nullptr);
  };
  std::promise<absl::StatusOr<std::vector<engine::Tensor>>> answer;
  (*servable)->RunAsync(std::move(batch), options,
                        [&answer](absl::StatusOr<std::vector<engine::Tensor>> outputs) {
                          answer.set_value(std::move(outputs));
                        });
  const absl::StatusOr<std::vector<engine::Tensor>> outputs = answer.get_future().get();
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), 2u);
  for (int o = 0; o < 2; ++o) {
    EXPECT_EQ((*outputs)[o].f32(), buffers[o].data()) << "output " << o;
  }
  // "echo" [B, T, 1] is x[b, t, 0]; "summary" [B, 2] is {T, sum of x[b, t, 0]}.
  EXPECT_EQ(buffers[0], (std::vector<float>{1, 3, 5, 7, 9, 11}));
  EXPECT_EQ(buffers[1], (std::vector<float>{3, 9, 3, 27}));
}

// EncodeInfer copies nothing that AllocateInfer placed in the response, and copies an
// engine's own tensor once.
TEST(RequestCoreAllocatorTest, EncodeInferLeavesAllocatedOutputsInPlace) {
  FakeEngineFactory engines;
  v1::ModelConfig config;
  config.set_name("fake");
  config.add_instance_group()->set_kind(v1::ModelInstanceGroup::KIND_CPU);
  auto servable = server::Servable::FromModel(FakeEngineFactory::Model(), 1, config,
                                              {.engine_factory = engines.Factory()});
  ASSERT_TRUE(servable.ok()) << servable.status();
  server::kserve::DecodedInfer decoded;
  decoded.outputs = {{.index = 1, .raw = true}, {.index = 0, .raw = false}};
  inference::ModelInferResponse response;
  const server::OutputAllocator allocate =
      server::kserve::AllocateInfer(**servable, decoded, &response);
  std::vector<engine::Tensor> outputs(2);
  outputs[1] = allocate(1, engine::DType::kFloat32, {1, 2});
  outputs[1].f32()[0] = 4;
  outputs[1].f32()[1] = 10;
  outputs[0] = engine::Tensor::Float({1, 2, 1}, {1, 3});  // the engine's own
  const char* placed = response.raw_output_contents(0).data();
  server::kserve::EncodeInfer(**servable, decoded, outputs, &response);
  EXPECT_EQ(response.raw_output_contents(0).data(), placed);
  EXPECT_EQ(Floats(response.raw_output_contents(0)), (std::vector<float>{4, 10}));
  ASSERT_EQ(response.outputs_size(), 2);
  EXPECT_EQ(response.outputs(0).name(), "summary");
  EXPECT_EQ(response.outputs(1).name(), "echo");
  EXPECT_EQ(response.raw_output_contents(1), "");
  EXPECT_EQ(std::vector<float>(response.outputs(1).contents().fp32_contents().begin(),
                               response.outputs(1).contents().fp32_contents().end()),
            (std::vector<float>{1, 3}));
}

}  // namespace
}  // namespace rnnserve::testing
