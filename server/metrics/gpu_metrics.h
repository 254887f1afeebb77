#pragma once

// GPU metrics on /metrics, under the names Triton users know, one series per GPU labelled
// gpu_uuid, read through NVML at scrape time:
//   nv_gpu_utilization          gauge, 0..1: the share of the last sample period a kernel ran
//   nv_gpu_memory_total_bytes   gauge
//   nv_gpu_memory_used_bytes    gauge
//   nv_gpu_power_usage          gauge, watts
//   nv_gpu_power_limit          gauge, watts
//   nv_energy_consumption       counter, joules since the driver loaded
// NVML (libnvidia-ml.so.1, part of the NVIDIA driver) is loaded at run time, so a CPU host
// needs no NVIDIA library: without it the collector is not made and the reason is logged once.
// A reading NVML does not support on a GPU (power on some boards) leaves that series out.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"

namespace rnnserve::server::metrics {

struct GpuReading {
  std::string uuid;         // "GPU-..."
  double utilization = -1;  // 0..1; -1: not supported
  double memory_total_bytes = -1;
  double memory_used_bytes = -1;
  double power_watts = -1;
  double power_limit_watts = -1;
  double energy_joules = -1;
};

// NVML, loaded from `library`; UNAVAILABLE saying why (no driver library, no GPU, init failed).
class Nvml {
 public:
  static absl::StatusOr<std::shared_ptr<Nvml>> Load(
      const std::string& library = "libnvidia-ml.so.1");
  ~Nvml();
  // One reading per GPU NVML sees, in its index order.
  std::vector<GpuReading> Read() const;

 private:
  struct Api;
  explicit Nvml(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
};

// The nv_gpu_* families from NVML at each scrape; UNAVAILABLE (with Nvml::Load's reason) where
// NVML cannot be loaded.
absl::StatusOr<std::shared_ptr<prometheus::Collectable>> NewGpuCollector(
    const std::string& library = "libnvidia-ml.so.1");

}  // namespace rnnserve::server::metrics
