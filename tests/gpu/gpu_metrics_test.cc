// GPU metrics through NVML (server/metrics/gpu_metrics.h): on a GPU machine every GPU has its
// nv_gpu_* series with readings in range; without NVML the collector is refused with the reason.

#include "server/metrics/gpu_metrics.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "absl/strings/match.h"
#include "engine/engine.h"
#include "server/metrics/server_metrics.h"

namespace rnnserve::server::metrics {
namespace {

TEST(GpuMetricsTest, EveryGpuHasItsSeriesWithReadingsInRange) {
  std::string why;
  if (!engine::CudaAvailable(&why)) GTEST_SKIP() << "no GPU here: " << why;
  auto nvml = Nvml::Load();
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  const std::vector<GpuReading> gpus = (*nvml)->Read();
  ASSERT_FALSE(gpus.empty());
  for (const GpuReading& g : gpus) {
    EXPECT_TRUE(absl::StartsWith(g.uuid, "GPU-")) << g.uuid;
    EXPECT_GE(g.utilization, 0.0);
    EXPECT_LE(g.utilization, 1.0);
    EXPECT_GT(g.memory_total_bytes, 1e9);
    EXPECT_GE(g.memory_used_bytes, 0.0);
    EXPECT_LE(g.memory_used_bytes, g.memory_total_bytes);
    std::printf("%s: utilization %.2f, memory %.0f of %.0f bytes, power %.1f W of %.1f W, "
                "energy %.0f J\n",
                g.uuid.c_str(), g.utilization, g.memory_used_bytes, g.memory_total_bytes,
                g.power_watts, g.power_limit_watts, g.energy_joules);
  }
  auto collector = NewGpuCollector();
  ASSERT_TRUE(collector.ok()) << collector.status();
  ServerMetrics m;
  m.AddCollectable(*collector);
  const std::string page = m.ExpositionText();
  for (const char* family : {"nv_gpu_utilization{gpu_uuid=\"GPU-", "nv_gpu_memory_total_bytes{",
                             "nv_gpu_memory_used_bytes{"}) {
    EXPECT_TRUE(absl::StrContains(page, family)) << family << " missing from\n" << page;
  }
}

TEST(GpuMetricsTest, WithoutNvmlTheCollectorIsRefusedSayingWhy) {
  auto collector = NewGpuCollector("libnvidia-ml-does-not-exist.so.1");
  ASSERT_FALSE(collector.ok());
  EXPECT_EQ(collector.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(collector.status().message(), "no NVML"))
      << collector.status();
}

}  // namespace
}  // namespace rnnserve::server::metrics
