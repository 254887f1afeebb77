#include "engine/cuda/resident_loop.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace rnnserve::engine::cuda {
namespace {

// Byte offsets of the host-mapped block: mailboxes, control, y, hy, cy.
struct MappedLayout {
  size_t mail, control, y, hy, cy, total;
  MappedLayout(int capacity, int max_steps, int H, bool per_step) {
    auto align = [](size_t n) { return (n + 255) / 256 * 256; };
    mail = 0;
    control = align(mail + sizeof(ResidentMailbox) * capacity);
    y = align(control + sizeof(ResidentControl));
    const size_t ys = per_step ? sizeof(float) * capacity * static_cast<size_t>(max_steps) * H : 0;
    hy = align(y + ys);
    cy = align(hy + sizeof(float) * capacity * static_cast<size_t>(H));
    total = align(cy + sizeof(float) * capacity * static_cast<size_t>(H));
  }
};

bool Is(const Activation& a, ActivationKind kind) { return a == Activation::Of(kind); }

}  // namespace

std::string ResidentLoop::Unsupported(const RecurrentSpec& spec) {
  if (spec.cell != CellType::kLstm && spec.cell != CellType::kGru) return "not an LSTM or GRU";
  if (spec.cell == CellType::kGru && !spec.reset_after) return "GRU reset_after=False";
  if (spec.directions.size() != 1) return "bidirectional";
  const RecurrentDirection& d = spec.directions[0];
  if (d.reverse) return "a reversed direction";
  if (spec.proj_size > 0 || !d.P.empty()) return "a projection";
  if (!d.peephole.empty()) return "peepholes";
  if (spec.clip > 0.0f) return "clip";
  if (spec.input_forget) return "input_forget";
  if (!Is(d.f, ActivationKind::kSigmoid) || !Is(d.g, ActivationKind::kTanh) ||
      (spec.cell == CellType::kLstm && !Is(d.h, ActivationKind::kTanh))) {
    return "activations other than sigmoid and tanh";
  }
  return "";
}

absl::StatusOr<std::unique_ptr<ResidentLoop>> ResidentLoop::Create(
    const RecurrentSpec& spec, const ResidentLoopOptions& options) {
  if (const std::string why = Unsupported(spec); !why.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("resident loop: the layer has ", why));
  }
  if (options.capacity <= 0 || options.capacity > kResidentMaxSlots || options.max_steps <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "resident loop: capacity must be in [1, ", kResidentMaxSlots,
        "] and max_steps positive; were ", options.capacity, " and ", options.max_steps));
  }
  if (options.units_per_block < 0 || options.units_per_block > spec.hidden_size) {
    return absl::InvalidArgumentError(absl::StrCat("resident loop: units_per_block must be in [0, ",
                                                   spec.hidden_size, "] (the hidden size); was ",
                                                   options.units_per_block));
  }
  std::unique_ptr<ResidentLoop> loop(new ResidentLoop());
  RNNSERVE_RETURN_IF_ERROR(loop->Start(spec, options));
  return loop;
}

absl::Status ResidentLoop::Start(const RecurrentSpec& spec, const ResidentLoopOptions& options) {
  device_ = options.device;
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaSetDevice(device_), "cudaSetDevice"));
  const int I = spec.input_size, H = spec.hidden_size, G = spec.gates();
  const int cap = options.capacity, T = options.max_steps;
  const RecurrentDirection& d = spec.directions[0];
  args_.cell = spec.cell == CellType::kLstm ? FusedRnnCell::kLstm : FusedRnnCell::kGru;
  args_.I = I;
  args_.H = H;
  args_.capacity = cap;
  args_.max_steps = T;
  generation_.assign(cap, 0);
  lengths_.assign(cap, 0);

  // Weights: W [G*H, I], R [G*H, H], bias [G*H] (bW + bR; the GRU's n gate bW only), bRn [H].
  const size_t gh = static_cast<size_t>(G) * H;
  // Then W transposed, [I, G*H], for the register kernel's input projection.
  std::vector<float> host(gh * I + gh * H + gh + H + gh * I, 0.0f);
  std::copy(d.W.begin(), d.W.end(), host.begin());
  std::copy(d.R.begin(), d.R.end(), host.begin() + gh * I);
  float* bias = host.data() + gh * (I + H);
  for (size_t r = 0; r < gh; ++r) {
    const bool n_gate = spec.cell == CellType::kGru && r >= 2 * static_cast<size_t>(H);
    bias[r] = (d.bW.empty() ? 0.0f : d.bW[r]) + (n_gate || d.bR.empty() ? 0.0f : d.bR[r]);
  }
  if (spec.cell == CellType::kGru && !d.bR.empty()) {
    std::copy(d.bR.begin() + 2 * H, d.bR.begin() + 3 * H, bias + gh);
  }
  float* wt = bias + gh + H;
  for (size_t r = 0; r < gh; ++r) {
    for (int k = 0; k < I; ++k) wt[k * gh + r] = d.W[r * I + k];
  }
  RNNSERVE_RETURN_IF_ERROR(weights_.Reserve(host.size() * sizeof(float)));
  RNNSERVE_RETURN_IF_ERROR(CudaOk(
      cudaMemcpy(weights_.get(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice),
      "cudaMemcpy (resident weights)"));
  args_.W = weights_.as<float>();
  args_.R = args_.W + gh * I;
  args_.bias = args_.R + gh * H;
  args_.bRn = spec.cell == CellType::kGru ? args_.bias + gh : nullptr;
  args_.WT = args_.bias + gh + H;

  // The kernel: the register kernel where it is compiled for the layer and the units a block
  // (by default the fewest of 1, 2, 4 that spread H over the multiprocessors), else the
  // shared-memory kernel (by default ceil(H / multiprocessors) units a block).
  int sms = 0, smem_max = 0;
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_),
             "cudaDeviceGetAttribute"));
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(cudaDeviceGetAttribute(&smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, device_),
             "cudaDeviceGetAttribute"));
  args_.units = options.units_per_block > 0 ? options.units_per_block : (H + sms - 1) / sms;
  if (options.register_kernel && options.units_per_block == 0) {
    for (int units : {1, 2, 4}) {
      if (units >= args_.units && ResidentRegLanes(args_.cell, H, units) > 0) {
        args_.units = units;
        break;
      }
    }
  }
  args_.lanes = options.register_kernel ? ResidentRegLanes(args_.cell, H, args_.units) : 0;
  args_.h_stride = args_.lanes > 0 ? 32 * args_.lanes : H;

  // Inputs: pinned staging and the device copy, [cap, T, I] each; the register kernel's input
  // projection [cap, T, G*H].
  const size_t xbytes = sizeof(float) * cap * static_cast<size_t>(T) * I;
  RNNSERVE_RETURN_IF_ERROR(x_.Reserve(xbytes));
  args_.x = x_.as<float>();
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(cudaHostAlloc(reinterpret_cast<void**>(&staging_), xbytes, cudaHostAllocDefault),
             "cudaHostAlloc (resident inputs)"));
  if (args_.lanes > 0) {
    RNNSERVE_RETURN_IF_ERROR(xproj_.Reserve(sizeof(float) * cap * static_cast<size_t>(T) * gh));
    args_.xproj = xproj_.as<float>();
  }

  // Device scratch: h [2, cap, H]; int32 list [2, cap, 4], step and length [2, cap] each and
  // gen [cap]; then the launch state.
  const size_t floats = 2 * static_cast<size_t>(cap) * args_.h_stride;
  const size_t sbytes = sizeof(float) * floats + 13 * sizeof(int32_t) * cap + 512;
  RNNSERVE_RETURN_IF_ERROR(scratch_.Reserve(sbytes));
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaMemset(scratch_.get(), 0, sbytes), "cudaMemset"));
  args_.h = scratch_.as<float>();
  args_.list = reinterpret_cast<int32_t*>(args_.h + floats);  // 16-byte aligned
  args_.step = args_.list + 8 * cap;
  args_.length = args_.step + 2 * cap;
  args_.gen = reinterpret_cast<uint32_t*>(args_.length + 2 * cap);
  char* state = reinterpret_cast<char*>(args_.gen + cap);
  state += (256 - reinterpret_cast<uintptr_t>(state) % 256) % 256;
  args_.state = reinterpret_cast<ResidentDeviceState*>(state);
  if (state + sizeof(ResidentDeviceState) > scratch_.as<char>() + sbytes) {
    return absl::InternalError("resident loop: scratch layout");
  }

  // Host-mapped: mailboxes, control, outputs.
  const MappedLayout m(cap, T, H, options.per_step_outputs);
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(cudaHostAlloc(&mapped_, m.total, cudaHostAllocMapped | cudaHostAllocPortable),
             "cudaHostAlloc (resident mailboxes)"));
  std::memset(mapped_, 0, m.total);
  char* dev = nullptr;
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev), mapped_, 0),
             "cudaHostGetDevicePointer"));
  args_.mail = reinterpret_cast<ResidentMailbox*>(dev + m.mail);
  args_.control = reinterpret_cast<ResidentControl*>(dev + m.control);
  args_.y = options.per_step_outputs ? reinterpret_cast<float*>(dev + m.y) : nullptr;
  args_.hy = reinterpret_cast<float*>(dev + m.hy);
  args_.cy = spec.cell == CellType::kLstm ? reinterpret_cast<float*>(dev + m.cy) : nullptr;

  // The shared-memory kernel: weights in shared memory when a block's rows fit.
  // Beside the static shared memory (block 0's flags and counters, about 1 KiB).
  const size_t dynamic_max = smem_max > 4096 ? smem_max - 4096 : 0;
  args_.tile = 1;
  args_.weights_in_smem = args_.lanes == 0;
  if (ResidentLoopSmem(args_) > dynamic_max) args_.weights_in_smem = false;
  // As many slots staged at once as fit, up to 32.
  while (args_.lanes == 0 && args_.tile < kResidentMaxTile && args_.tile < cap) {
    ++args_.tile;
    if (ResidentLoopSmem(args_) > dynamic_max) {
      --args_.tile;
      break;
    }
  }
  if (ResidentLoopSmem(args_) > dynamic_max) {
    return absl::InvalidArgumentError(absl::StrCat("resident loop: one slot's input and state (",
                                                   I + H, " floats) exceed shared memory"));
  }
  int max_blocks = 0;
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(ResidentLoopMaxBlocks(args_, device_, &max_blocks), "resident loop occupancy"));
  if (max_blocks < blocks()) {
    return absl::ResourceExhaustedError(absl::StrCat("resident loop: ", blocks(),
                                                     " blocks must be resident at once; the "
                                                     "device holds ",
                                                     max_blocks));
  }
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(cudaStreamCreateWithFlags(&loop_stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
  if (args_.lanes > 0) {
    // One projection before the loop starts: with lazy module loading, the first launch of a
    // kernel loads it, which may wait for every running kernel, the loop's included, and the
    // loop waits for the join that the projection precedes.
    RNNSERVE_RETURN_IF_ERROR(
        CudaOk(LaunchResidentProjection(args_, 0, 1, copy_stream_), "resident input projection"));
  }
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
  RNNSERVE_RETURN_IF_ERROR(CudaOk(LaunchResidentLoop(args_, loop_stream_), "resident loop launch"));
  launched_ = true;
  return absl::OkStatus();
}

ResidentLoop::~ResidentLoop() {
  cudaSetDevice(device_);
  if (launched_) {
    const MappedLayout m(args_.capacity, args_.max_steps, args_.H, args_.y != nullptr);
    auto* control = reinterpret_cast<ResidentControl*>(static_cast<char*>(mapped_) + m.control);
    __atomic_store_n(&control->stop, 1u, __ATOMIC_RELEASE);
    cudaStreamSynchronize(loop_stream_);
  }
  if (copy_stream_ != nullptr) cudaStreamDestroy(copy_stream_);
  if (loop_stream_ != nullptr) cudaStreamDestroy(loop_stream_);
  if (mapped_ != nullptr) cudaFreeHost(mapped_);
  if (staging_ != nullptr) cudaFreeHost(staging_);
}

absl::Status ResidentLoop::Join(int slot, const float* x, int length) {
  if (slot < 0 || slot >= args_.capacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("resident loop: slot ", slot, " is not in [0, ", args_.capacity, ")"));
  }
  if (length < 1 || length > args_.max_steps) {
    return absl::InvalidArgumentError(
        absl::StrCat("resident loop: length ", length, " is not in [1, ", args_.max_steps, "]"));
  }
  if (!Done(slot)) {
    return absl::FailedPreconditionError(
        absl::StrCat("resident loop: slot ", slot, " still runs a sequence"));
  }
  const size_t offset = static_cast<size_t>(slot) * args_.max_steps * args_.I;
  const size_t bytes = sizeof(float) * static_cast<size_t>(length) * args_.I;
  std::memcpy(staging_ + offset, x, bytes);
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(cudaMemcpyAsync(const_cast<float*>(args_.x) + offset, staging_ + offset, bytes,
                             cudaMemcpyHostToDevice, copy_stream_),
             "cudaMemcpyAsync (resident inputs)"));
  if (args_.lanes > 0) {
    RNNSERVE_RETURN_IF_ERROR(CudaOk(LaunchResidentProjection(args_, slot, length, copy_stream_),
                                    "resident input projection"));
  }
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaStreamSynchronize(copy_stream_), "cudaStreamSynchronize"));
  const MappedLayout m(args_.capacity, args_.max_steps, args_.H, args_.y != nullptr);
  auto* mail = reinterpret_cast<ResidentMailbox*>(static_cast<char*>(mapped_) + m.mail) + slot;
  __atomic_store_n(&mail->length, length, __ATOMIC_RELAXED);
  lengths_[slot] = length;
  __atomic_store_n(&mail->joined, ++generation_[slot], __ATOMIC_RELEASE);
  return absl::OkStatus();
}

bool ResidentLoop::Started(int slot) const {
  const MappedLayout m(args_.capacity, args_.max_steps, args_.H, args_.y != nullptr);
  auto* mail = reinterpret_cast<ResidentMailbox*>(static_cast<char*>(mapped_) + m.mail) + slot;
  return __atomic_load_n(&mail->started, __ATOMIC_ACQUIRE) == generation_[slot];
}

bool ResidentLoop::Done(int slot) const {
  const MappedLayout m(args_.capacity, args_.max_steps, args_.H, args_.y != nullptr);
  auto* mail = reinterpret_cast<ResidentMailbox*>(static_cast<char*>(mapped_) + m.mail) + slot;
  return __atomic_load_n(&mail->done, __ATOMIC_ACQUIRE) == generation_[slot];
}

const float* ResidentLoop::outputs(int slot) const {
  if (args_.y == nullptr) return nullptr;
  const MappedLayout m(args_.capacity, args_.max_steps, args_.H, args_.y != nullptr);
  return reinterpret_cast<const float*>(static_cast<char*>(mapped_) + m.y) +
         static_cast<size_t>(slot) * args_.max_steps * args_.H;
}

const float* ResidentLoop::final_h(int slot) const {
  const MappedLayout m(args_.capacity, args_.max_steps, args_.H, args_.y != nullptr);
  return reinterpret_cast<const float*>(static_cast<char*>(mapped_) + m.hy) +
         static_cast<size_t>(slot) * args_.H;
}

const float* ResidentLoop::final_c(int slot) const {
  if (args_.cy == nullptr) return nullptr;
  const MappedLayout m(args_.capacity, args_.max_steps, args_.H, args_.y != nullptr);
  return reinterpret_cast<const float*>(static_cast<char*>(mapped_) + m.cy) +
         static_cast<size_t>(slot) * args_.H;
}

uint64_t ResidentLoop::steps() const {
  const MappedLayout m(args_.capacity, args_.max_steps, args_.H, args_.y != nullptr);
  auto* control = reinterpret_cast<ResidentControl*>(static_cast<char*>(mapped_) + m.control);
  return __atomic_load_n(&control->steps, __ATOMIC_ACQUIRE);
}

}  // namespace rnnserve::engine::cuda
