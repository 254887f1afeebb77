#include "engine/cuda/cudnn_rnn.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cudnn_rnn_util.h"
#include "engine/cuda/fused_rnn.h"
#include "engine/cuda/kernels.h"

namespace rnnserve::engine::cuda {

CudnnRecurrent::CudnnRecurrent(const RecurrentSpec& spec, std::string name, MathMode math,
                               cudnnHandle_t handle, cudaStream_t stream)
    : spec_(spec),
      name_(std::move(name)),
      math_(math),
      handle_(handle),
      stream_(stream),
      dirs_(static_cast<int>(spec.directions.size())),
      I_(spec.input_size),
      H_(spec.hidden_size),
      Hp_(spec.output_size()),
      dtype_(DataTypeFor(math)) {}

CudnnRecurrent::~CudnnRecurrent() {
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
  for (auto& [algo, desc] : descs_) cudnnDestroyRNNDescriptor(desc);
  for (auto& [batch, desc] : dynamic_by_batch_) cudnnDestroyRNNDescriptor(desc);
  for (cudnnRNNDataDescriptor_t d : {x_desc_, y_desc_, x_seq_desc_, y_seq_desc_}) {
    if (d) cudnnDestroyRNNDataDescriptor(d);
  }
  if (h_desc_) cudnnDestroyTensorDescriptor(h_desc_);
  if (c_desc_) cudnnDestroyTensorDescriptor(c_desc_);
}

absl::StatusOr<std::unique_ptr<CudnnRecurrent>> CudnnRecurrent::Create(const RecurrentSpec& spec,
                                                                       const std::string& name,
                                                                       MathMode math,
                                                                       cudnnHandle_t handle,
                                                                       cudaStream_t stream) {
  RNNSERVE_RETURN_IF_ERROR(spec.Validate(name));
  if (auto s = CudnnSupports(spec); !s.ok()) {
    return absl::UnimplementedError(absl::StrCat("layer '", name, "': ", s.message()));
  }
  std::unique_ptr<CudnnRecurrent> r(new CudnnRecurrent(spec, name, math, handle, stream));
  if (auto s = r->Init(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("layer '", name, "': ", s.message()));
  }
  return r;
}

cudnnStatus_t CudnnRecurrent::SetDescriptor(cudnnRNNDescriptor_t desc, cudnnRNNAlgo_t algo) const {
  cudnnRNNMode_t mode = CUDNN_LSTM;
  if (spec_.cell == CellType::kGru) mode = CUDNN_GRU;
  if (spec_.cell == CellType::kSimpleRnn) {
    mode = spec_.directions[0].f.kind == ActivationKind::kRelu ? CUDNN_RNN_RELU : CUDNN_RNN_TANH;
  }
  // Exact FP32 is FMA math: no tensor cores, no reduced-precision inputs. TF32 lets cuDNN use
  // TF32 tensor cores on FP32 data; FP16/BF16 store data and weights in half precision and
  // accumulate in FP32.
  cudnnMathType_t math_type = CUDNN_FMA_MATH;
  if (math_ == MathMode::kTf32) math_type = CUDNN_DEFAULT_MATH;
  if (math_ == MathMode::kFp16 || math_ == MathMode::kBf16) math_type = CUDNN_TENSOR_OP_MATH;
  return cudnnSetRNNDescriptor_v8(desc, algo, mode, CUDNN_RNN_DOUBLE_BIAS,
                                  dirs_ == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL,
                                  CUDNN_LINEAR_INPUT, dtype_, CUDNN_DATA_FLOAT, math_type, I_, H_,
                                  Hp_, /*numLayers=*/1, /*dropoutDesc=*/nullptr,
                                  CUDNN_RNN_PADDED_IO_ENABLED);
}

bool CudnnRecurrent::Available(cudnnRNNAlgo_t algo) const {
  if (algo == kFusedAlgo) return fused_ != nullptr && fused_->has_grid();
  if (algo == kFusedClusterAlgo) return fused_ != nullptr && fused_->has_cluster();
  if (algo == kFusedBatchedAlgo) return fused_ != nullptr && fused_->has_batched();
  if (algo == kStandardSeqMajorAlgo) {
    return dtype_ == CUDNN_DATA_FLOAT && descs_.contains(CUDNN_RNN_ALGO_STANDARD);
  }
  return descs_.contains(algo);
}

absl::StatusOr<cudnnRNNDescriptor_t> CudnnRecurrent::DescriptorFor(cudnnRNNAlgo_t algo, int B) {
  if (algo != CUDNN_RNN_ALGO_PERSIST_DYNAMIC) {
    auto it = descs_.find(algo);
    if (it == descs_.end()) {
      return absl::InternalError(absl::StrCat("cuDNN algorithm ", AlgoName(algo), " was dropped"));
    }
    return it->second;
  }
  if (auto it = dynamic_by_batch_.find(B); it != dynamic_by_batch_.end()) return it->second;
  // PERSIST_DYNAMIC compiles its kernel for one batch size (NVRTC, once per size).
  cudnnRNNDescriptor_t desc = nullptr;
  RNNSERVE_RETURN_IF_ERROR(CudnnOk(cudnnCreateRNNDescriptor(&desc), "cudnnCreateRNNDescriptor"));
  cudnnStatus_t st = SetDescriptor(desc, algo);
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnBuildRNNDynamic(handle_, desc, B);
  if (st != CUDNN_STATUS_SUCCESS) {
    cudnnDestroyRNNDescriptor(desc);
    return CudnnOk(st, absl::StrCat("cudnnBuildRNNDynamic (batch ", B, ")").c_str());
  }
  dynamic_by_batch_[B] = desc;
  return desc;
}

absl::Status CudnnRecurrent::Init() {
  // Exact FP32 runs the standard algorithm only: the persistent kernels differ from FP32 by up
  // to ~1e-4 relative on the conformance corpus (they are not exact), which the reduced
  // precision modes absorb and exact FP32 does not.
  std::vector<cudnnRNNAlgo_t> candidates = {CUDNN_RNN_ALGO_STANDARD};
  if (math_ != MathMode::kFp32) {
    candidates.push_back(CUDNN_RNN_ALGO_PERSIST_STATIC);
    candidates.push_back(CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H);
    // Accepted here on its descriptor; built per batch size when first timed (DescriptorFor).
    candidates.push_back(CUDNN_RNN_ALGO_PERSIST_DYNAMIC);
  }
  for (cudnnRNNAlgo_t algo : candidates) {
    cudnnRNNDescriptor_t desc = nullptr;
    RNNSERVE_RETURN_IF_ERROR(CudnnOk(cudnnCreateRNNDescriptor(&desc), "cudnnCreateRNNDescriptor"));
    const cudnnStatus_t st = SetDescriptor(desc, algo);
    size_t bytes = 0;
    if (st == CUDNN_STATUS_SUCCESS &&
        cudnnGetRNNWeightSpaceSize(handle_, desc, &bytes) == CUDNN_STATUS_SUCCESS &&
        (descs_.empty() || bytes == weight_bytes_)) {
      weight_bytes_ = bytes;
      descs_[algo] = desc;
    } else {
      cudnnDestroyRNNDescriptor(desc);
      if (algo == CUDNN_RNN_ALGO_STANDARD) {
        return CudnnOk(st == CUDNN_STATUS_SUCCESS ? CUDNN_STATUS_NOT_SUPPORTED : st,
                       "cudnnSetRNNDescriptor_v8 (standard algorithm)");
      }
    }
  }
  // Exact FP32 has its own persistent kernels for small batches (fused_rnn.h), and TF32 layers
  // are offered the same (exact FP32 is within TF32's error, and at small batches faster than
  // cuDNN's TF32) with their input projection in TF32 and the batch-tiled kernel's TF32
  // tensor-core tiles; FP16 and BF16 have the cluster, register and batch-tiled kernels with R
  // in that precision and everything else in FP32.
  if (math_ == MathMode::kFp32 || math_ == MathMode::kTf32 || math_ == MathMode::kFp16 ||
      math_ == MathMode::kBf16) {
    const FusedRnnWeights weights = math_ == MathMode::kFp16   ? FusedRnnWeights::kFp16
                                    : math_ == MathMode::kBf16 ? FusedRnnWeights::kBf16
                                                               : FusedRnnWeights::kFp32;
    if (auto f = FusedRnn::Create(spec_, stream_, weights, math_ == MathMode::kTf32); f.ok()) {
      fused_ = std::move(*f);
    }
  }
  for (cudnnRNNDataDescriptor_t* d : {&x_desc_, &y_desc_, &x_seq_desc_, &y_seq_desc_}) {
    RNNSERVE_RETURN_IF_ERROR(
        CudnnOk(cudnnCreateRNNDataDescriptor(d), "cudnnCreateRNNDataDescriptor"));
  }
  RNNSERVE_RETURN_IF_ERROR(
      CudnnOk(cudnnCreateTensorDescriptor(&h_desc_), "cudnnCreateTensorDescriptor"));
  RNNSERVE_RETURN_IF_ERROR(
      CudnnOk(cudnnCreateTensorDescriptor(&c_desc_), "cudnnCreateTensorDescriptor"));
  return PackWeights();
}

absl::Status CudnnRecurrent::PackWeights() {
  RNNSERVE_RETURN_IF_ERROR(weights_.Reserve(weight_bytes_));
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(cudaMemsetAsync(weights_.get(), 0, weight_bytes_, stream_), "cudaMemsetAsync"));
  cudnnRNNDescriptor_t desc = descs_.at(CUDNN_RNN_ALGO_STANDARD);
  cudnnTensorDescriptor_t m_desc = nullptr, b_desc = nullptr;
  RNNSERVE_RETURN_IF_ERROR(CudnnOk(cudnnCreateTensorDescriptor(&m_desc), "create mDesc"));
  RNNSERVE_RETURN_IF_ERROR(CudnnOk(cudnnCreateTensorDescriptor(&b_desc), "create bDesc"));
  DeviceBuffer staging;  // FP32 copy before conversion in FP16/BF16 modes
  const int G = spec_.gates();

  // Copies n floats from the host into the weight space at dst, in the weight space's type.
  auto copy = [&](const float* src, int64_t n, void* dst) -> absl::Status {
    if (dtype_ == CUDNN_DATA_FLOAT) {
      return CudaOk(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyHostToDevice, stream_),
                    "cudaMemcpyAsync (weights)");
    }
    RNNSERVE_RETURN_IF_ERROR(staging.Reserve(n * sizeof(float)));
    RNNSERVE_RETURN_IF_ERROR(CudaOk(
        cudaMemcpyAsync(staging.get(), src, n * sizeof(float), cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync (weights)"));
    RNNSERVE_RETURN_IF_ERROR(
        CudaOk(LaunchToHalf(staging.as<float>(), dst, n, HalfOf(dtype_), stream_),
               "weight conversion kernel"));
    // The staging buffer is reused by the next copy: wait for this one.
    return CudaOk(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  };
  // Element count of a parameter cuDNN describes.
  auto count = [](cudnnTensorDescriptor_t d) -> int64_t {
    cudnnDataType_t t;
    int nb = 0, dims[8], strides[8];
    if (cudnnGetTensorNdDescriptor(d, 8, &t, &nb, dims, strides) != CUDNN_STATUS_SUCCESS) {
      return -1;
    }
    int64_t n = 1;
    for (int i = 0; i < nb; ++i) n *= dims[i];
    return n;
  };

  absl::Status status = absl::OkStatus();
  const int lin_layers = 2 * G + (spec_.proj_size > 0 ? 1 : 0);
  for (int d = 0; d < dirs_ && status.ok(); ++d) {
    const RecurrentDirection& dir = spec_.directions[d];
    for (int id = 0; id < lin_layers && status.ok(); ++id) {
      void* m_addr = nullptr;
      void* b_addr = nullptr;
      status = CudnnOk(cudnnGetRNNWeightParams(handle_, desc, d, weight_bytes_, weights_.get(), id,
                                               m_desc, &m_addr, b_desc, &b_addr),
                       "cudnnGetRNNWeightParams");
      if (!status.ok()) break;
      const float* m_src;
      const float* b_src = nullptr;
      int64_t m_n;
      if (id < G) {  // input weights of gate id: rows [id*H, (id+1)*H) of W [G*H, I]
        m_src = dir.W.data() + int64_t{id} * H_ * I_;
        m_n = int64_t{H_} * I_;
        b_src = dir.bW.data() + int64_t{id} * H_;
      } else if (id < 2 * G) {  // recurrent weights of gate id-G: R [G*H, H']
        m_src = dir.R.data() + int64_t{id - G} * H_ * Hp_;
        m_n = int64_t{H_} * Hp_;
        b_src = dir.bR.data() + int64_t{id - G} * H_;
      } else {  // projection P [H', H]
        m_src = dir.P.data();
        m_n = int64_t{Hp_} * H_;
      }
      if (m_addr == nullptr || count(m_desc) != m_n) {
        status =
            absl::InternalError(absl::StrCat("cuDNN weight matrix ", id, " of direction ", d,
                                             " has ", count(m_desc), " elements, expected ", m_n));
        break;
      }
      status = copy(m_src, m_n, m_addr);
      if (status.ok() && b_src != nullptr && b_addr != nullptr) {
        if (count(b_desc) != H_) {
          status = absl::InternalError(
              absl::StrCat("cuDNN bias ", id, " has ", count(b_desc), " elements, expected ", H_));
        } else {
          status = copy(b_src, H_, b_addr);
        }
      }
    }
  }
  cudnnDestroyTensorDescriptor(m_desc);
  cudnnDestroyTensorDescriptor(b_desc);
  RNNSERVE_RETURN_IF_ERROR(status);
  return CudaOk(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (weights)");
}

absl::Status CudnnRecurrent::SetDataDescriptors(cudnnRNNDataLayout_t layout, const RecurrentIO& io,
                                                cudnnRNNDataDescriptor_t x,
                                                cudnnRNNDataDescriptor_t y) {
  static const double kZero = 0.0;  // all-zero bits: a zero of every data type
  void* fill = const_cast<double*>(&kZero);
  RNNSERVE_RETURN_IF_ERROR(
      CudnnOk(cudnnSetRNNDataDescriptor(x, dtype_, layout, io.T, io.B, I_, io.lengths.data(), fill),
              "cudnnSetRNNDataDescriptor (x)"));
  return CudnnOk(cudnnSetRNNDataDescriptor(y, dtype_, layout, io.T, io.B, dirs_ * Hp_,
                                           io.lengths.data(), fill),
                 "cudnnSetRNNDataDescriptor (y)");
}

bool CudnnRecurrent::SeqMajor(cudnnRNNAlgo_t algo) const {
  if (IsFused(algo)) return false;
  return dtype_ != CUDNN_DATA_FLOAT || (algo == kStandardSeqMajorAlgo && Available(algo));
}

absl::Status CudnnRecurrent::SetShape(const RecurrentIO& io) {
  // The batch-major pair describes the model values as they are (FP32/TF32); the
  // sequence-major pair, the copies cuDNN runs on in half precision and under
  // kStandardSeqMajorAlgo.
  if (dtype_ == CUDNN_DATA_FLOAT) {
    RNNSERVE_RETURN_IF_ERROR(
        SetDataDescriptors(CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, io, x_desc_, y_desc_));
  }
  if (dtype_ != CUDNN_DATA_FLOAT || Available(kStandardSeqMajorAlgo)) {
    RNNSERVE_RETURN_IF_ERROR(
        SetDataDescriptors(CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, io, x_seq_desc_, y_seq_desc_));
  }
  const int hd[3] = {dirs_, io.B, Hp_}, hs[3] = {io.B * Hp_, Hp_, 1};
  const int cd[3] = {dirs_, io.B, H_}, cs[3] = {io.B * H_, H_, 1};
  RNNSERVE_RETURN_IF_ERROR(
      CudnnOk(cudnnSetTensorNdDescriptor(h_desc_, dtype_, 3, hd, hs), "hDesc"));
  return CudnnOk(cudnnSetTensorNdDescriptor(c_desc_, dtype_, 3, cd, cs), "cDesc");
}

absl::Status CudnnRecurrent::Launch(cudnnRNNAlgo_t algo, const RecurrentIO& io) {
  // An algorithm dropped after failing for another batch size runs as the standard one.
  if (!Available(algo)) algo = CUDNN_RNN_ALGO_STANDARD;
  if (algo == kFusedAlgo) return fused_->Forward(io, FusedRnn::Kernel::kGrid);
  if (algo == kFusedClusterAlgo) return fused_->Forward(io, FusedRnn::Kernel::kCluster);
  if (algo == kFusedBatchedAlgo) return fused_->Forward(io, FusedRnn::Kernel::kBatched);
  const bool seq_major = SeqMajor(algo);
  if (algo == kStandardSeqMajorAlgo) algo = CUDNN_RNN_ALGO_STANDARD;
  auto described = DescriptorFor(algo, io.B);
  if (!described.ok()) return described.status();
  cudnnRNNDescriptor_t desc = *described;
  const cudnnRNNDataDescriptor_t x_desc = seq_major ? x_seq_desc_ : x_desc_;
  const cudnnRNNDataDescriptor_t y_desc = seq_major ? y_seq_desc_ : y_desc_;
  size_t ws = 0, reserve = 0;
  RNNSERVE_RETURN_IF_ERROR(CudnnOk(
      cudnnGetRNNTempSpaceSizes(handle_, desc, CUDNN_FWD_MODE_INFERENCE, x_desc, &ws, &reserve),
      "cudnnGetRNNTempSpaceSizes"));
  RNNSERVE_RETURN_IF_ERROR(workspace_.Reserve(std::max<size_t>(ws, 1)));
  const bool half = dtype_ != CUDNN_DATA_FLOAT;
  const bool lstm = spec_.cell == CellType::kLstm;
  const void* x = io.x;
  void* y = io.y != nullptr ? io.y : y_scratch_.get();
  const void* h0 = io.h0;
  const void* c0 = io.c0;
  void* hy = io.hy;
  void* cy = io.cy;
  if (seq_major) {
    x = x_seq_.get();
    y = y_seq_.get();
  }
  if (half) {
    h0 = io.h0 ? h0_half_.get() : nullptr;
    c0 = io.c0 ? c0_half_.get() : nullptr;
    hy = hy_half_.get();
    cy = lstm ? cy_half_.get() : nullptr;
  }
  return CudnnOk(cudnnRNNForward(handle_, desc, CUDNN_FWD_MODE_INFERENCE, io.lengths_dev, x_desc, x,
                                 y_desc, y, h_desc_, h0, hy, c_desc_, c0, lstm ? cy : nullptr,
                                 weight_bytes_, weights_.get(), ws, workspace_.get(), 0, nullptr),
                 absl::StrCat("cudnnRNNForward (", AlgoName(algo), ")").c_str());
}

absl::Status CudnnRecurrent::Enqueue(cudnnRNNAlgo_t algo, const RecurrentIO& io) {
  const int64_t h_n = int64_t{dirs_} * io.B * Hp_;
  const int64_t c_n = int64_t{dirs_} * io.B * H_;
  const bool lstm = spec_.cell == CellType::kLstm;
  // The fused kernels read and write FP32 states whatever the layer's precision.
  const bool half = dtype_ != CUDNN_DATA_FLOAT && !IsFused(algo);
  const HalfKind k = HalfOf(dtype_);
  const bool seq_major = SeqMajor(algo);
  if (seq_major) {  // x [B, T, I] -> [T, B, I], converted in half precision
    RNNSERVE_RETURN_IF_ERROR(
        CudaOk(half ? LaunchToHalfSwap01(io.x, x_seq_.get(), io.B, io.T, I_, k, stream_)
                    : LaunchSwap01(io.x, x_seq_.as<float>(), io.B, io.T, I_, stream_),
               "x to sequence-major"));
  }
  if (half && io.h0) {
    RNNSERVE_RETURN_IF_ERROR(
        CudaOk(LaunchToHalf(io.h0, h0_half_.get(), h_n, k, stream_), "h0 to half"));
  }
  if (half && io.c0) {
    RNNSERVE_RETURN_IF_ERROR(
        CudaOk(LaunchToHalf(io.c0, c0_half_.get(), c_n, k, stream_), "c0 to half"));
  }
  RNNSERVE_RETURN_IF_ERROR(Launch(algo, io));
  if (seq_major && io.y) {  // and back
    const int64_t row = int64_t{dirs_} * Hp_;
    RNNSERVE_RETURN_IF_ERROR(
        CudaOk(half ? LaunchFromHalfSwap01(y_seq_.get(), io.y, io.T, io.B, row, k, stream_)
                    : LaunchSwap01(y_seq_.as<float>(), io.y, io.T, io.B, row, stream_),
               "y to batch-major"));
  }
  if (half) {
    RNNSERVE_RETURN_IF_ERROR(
        CudaOk(LaunchFromHalf(hy_half_.get(), io.hy, h_n, k, stream_), "hy to float"));
    if (lstm && io.cy) {
      RNNSERVE_RETURN_IF_ERROR(
          CudaOk(LaunchFromHalf(cy_half_.get(), io.cy, c_n, k, stream_), "cy to float"));
    }
  }
  return RepeatKerasLastOutputs(spec_, io, stream_);
}

absl::Status RepeatKerasLastOutputs(const RecurrentSpec& spec, const RecurrentIO& io,
                                    cudaStream_t stream) {
  if (!io.y || EveryLengthFull(io) || spec.masking != MaskSemantics::kKeras ||
      spec.zero_output_for_mask) {
    return absl::OkStatus();
  }
  const int dirs = static_cast<int>(spec.directions.size()), Hp = spec.output_size();
  for (int d = 0; d < dirs; ++d) {
    if (spec.directions[d].reverse) continue;
    RNNSERVE_RETURN_IF_ERROR(
        CudaOk(LaunchRepeatLastOutput(io.y, io.hy + int64_t{d} * io.B * Hp, io.lengths_dev, io.B,
                                      io.T, dirs * Hp, d * Hp, Hp, stream),
               "repeat-last-output kernel"));
  }
  return absl::OkStatus();
}

std::string CudnnRecurrent::GraphKey(cudnnRNNAlgo_t algo, const RecurrentIO& io) const {
  // Everything a captured graph bakes in: shape, lengths, algorithm and every device address.
  // cuDNN's calls take the lengths on the host; the fused kernels read each row's length on the
  // device and bake in only the longest (their step count) and whether every row is full (the
  // Keras repeat-last-output pass), so a step-level batching chunk of any lengths reuses one
  // graph per batch size.
  std::string key = absl::StrCat(static_cast<int>(algo), "|", io.B, "|", io.T, "|");
  if (IsFused(algo)) {
    absl::StrAppend(&key, *std::max_element(io.lengths.begin(), io.lengths.end()), ",",
                    EveryLengthFull(io) ? "full" : "varlen");
  } else {
    for (int32_t len : io.lengths) absl::StrAppend(&key, len, ",");
  }
  const void* addresses[] = {io.x,
                             io.y,
                             io.h0,
                             io.c0,
                             io.hy,
                             io.cy,
                             io.lengths_dev,
                             workspace_.get(),
                             y_scratch_.get(),
                             x_seq_.get(),
                             y_seq_.get(),
                             h0_half_.get(),
                             c0_half_.get(),
                             hy_half_.get(),
                             cy_half_.get()};
  for (const void* p : addresses) {
    absl::StrAppend(&key, "|", reinterpret_cast<uintptr_t>(p));
  }
  if (fused_) {
    for (const void* p : fused_->buffers()) {
      absl::StrAppend(&key, "|", reinterpret_cast<uintptr_t>(p));
    }
  }
  return key;
}

absl::Status CudnnRecurrent::EnqueueWithGraph(cudnnRNNAlgo_t algo, const RecurrentIO& io) {
  // Inside the compiled model's capture of a whole batch, the layer's launches join that graph.
  if (StreamCapturing(stream_)) return Enqueue(algo, io);
  const std::string key = GraphKey(algo, io);
  if (auto it = graphs_.find(key); it != graphs_.end()) {
    return CudaOk(cudaGraphLaunch(it->second, stream_), "cudaGraphLaunch");
  }
  // The first batch of a shape runs eagerly (it also sizes the workspace); the second is
  // captured, so shapes seen once cost no graph.
  // Shapes seen once are forgotten past kMaxSeen (lengths that never repeat must not grow the
  // set for ever).
  if (seen_.size() >= kMaxSeen && !seen_.count(key)) seen_.clear();
  if (!seen_.insert(key).second && graphs_.size() < kMaxGraphs) {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    RNNSERVE_RETURN_IF_ERROR(
        CudaOk(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "begin capture"));
    const absl::Status s = Enqueue(algo, io);
    const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
    if (s.ok() && end == cudaSuccess && graph != nullptr &&
        cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) {
      cudaGraphDestroy(graph);
      graphs_[key] = exec;
      return CudaOk(cudaGraphLaunch(exec, stream_), "cudaGraphLaunch");
    }
    // cuDNN would not be captured here: run eagerly from now on.
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
    use_graphs_ = false;
  }
  return Enqueue(algo, io);
}

absl::Status CudnnRecurrent::CheckBatch(const RecurrentIO& io) const {
  if (io.B <= 0 || io.T <= 0 || static_cast<int>(io.lengths.size()) != io.B) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", name_, "': batch ", io.B, ", ", io.T,
                                                   " steps, ", io.lengths.size(), " lengths"));
  }
  for (int32_t len : io.lengths) {
    if (len < 1 || len > io.T) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer '", name_, "': length ", len, " outside [1, ", io.T, "] on the GPU"));
    }
  }
  return absl::OkStatus();
}

absl::Status CudnnRecurrent::Forward(const RecurrentIO& io) {
  RNNSERVE_RETURN_IF_ERROR(CheckBatch(io));
  const bool full = EveryLengthFull(io);
  RNNSERVE_RETURN_IF_ERROR(SetShape(io));
  const int64_t x_n = int64_t{io.B} * io.T * I_;
  const int64_t y_n = int64_t{io.B} * io.T * dirs_ * Hp_;
  const int64_t h_n = int64_t{dirs_} * io.B * Hp_;
  const int64_t c_n = int64_t{dirs_} * io.B * H_;
  if (io.y == nullptr) RNNSERVE_RETURN_IF_ERROR(y_scratch_.Reserve(y_n * sizeof(float)));
  const size_t e = ElementBytes(dtype_);
  if (dtype_ != CUDNN_DATA_FLOAT || Available(kStandardSeqMajorAlgo)) {
    RNNSERVE_RETURN_IF_ERROR(x_seq_.Reserve(x_n * e));
    RNNSERVE_RETURN_IF_ERROR(y_seq_.Reserve(y_n * e));
  }
  if (dtype_ != CUDNN_DATA_FLOAT) {
    RNNSERVE_RETURN_IF_ERROR(h0_half_.Reserve(h_n * e));
    RNNSERVE_RETURN_IF_ERROR(hy_half_.Reserve(h_n * e));
    RNNSERVE_RETURN_IF_ERROR(c0_half_.Reserve(c_n * e));
    RNNSERVE_RETURN_IF_ERROR(cy_half_.Reserve(c_n * e));
  }
  cudnnRNNAlgo_t algo = CUDNN_RNN_ALGO_STANDARD;
  if (full || !varlen_standard_only_) {
    auto chosen = ChooseAlgorithm(io);
    if (!chosen.ok()) return chosen.status();
    algo = *chosen;
  }
  // PERSIST_DYNAMIC does not take sequences of different lengths; a batch of its size that
  // has them runs on the standard algorithm.
  if (algo == CUDNN_RNN_ALGO_PERSIST_DYNAMIC && !full) algo = CUDNN_RNN_ALGO_STANDARD;
  absl::Status s = use_graphs_ ? EnqueueWithGraph(algo, io) : Enqueue(algo, io);
  if (!s.ok() && algo != CUDNN_RNN_ALGO_STANDARD) {
    // A persistent algorithm cuDNN refuses for this batch (e.g. padded lengths): fall back to
    // the standard one for such batches from now on.
    cudaGetLastError();
    if (full) {
      algo_by_batch_[{BatchBucket(io.B), StepBucket(io.T)}] = CUDNN_RNN_ALGO_STANDARD;
    } else {
      varlen_standard_only_ = true;
    }
    algo = CUDNN_RNN_ALGO_STANDARD;
    s = Enqueue(algo, io);
  }
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat("layer '", name_, "': ", s.message()));
  last_bakes_lengths_ = !full && !IsFused(algo);
  return absl::OkStatus();
}

int64_t CudnnRecurrent::memory_bytes() const {
  return (fused_ ? fused_->memory_bytes() : 0) +
         static_cast<int64_t>(weights_.bytes() + workspace_.bytes() + y_scratch_.bytes() +
                              x_seq_.bytes() + y_seq_.bytes() + h0_half_.bytes() +
                              c0_half_.bytes() + hy_half_.bytes() + cy_half_.bytes());
}

}  // namespace rnnserve::engine::cuda
