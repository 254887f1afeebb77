#include "server/metrics/gpu_metrics.h"

#include <dlfcn.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "prometheus/metric_family.h"

namespace rnnserve::server::metrics {
namespace {

// NVML's C API, the part used here (nvml.h of the driver; the types are its ABI).
using NvmlReturn = int;  // nvmlReturn_t; 0 is NVML_SUCCESS
using NvmlDevice = void*;
struct NvmlUtilization {
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

template <typename Fn>
Fn Symbol(void* handle, const char* name, std::string* missing) {
  void* f = dlsym(handle, name);
  if (f == nullptr && missing->empty()) *missing = name;
  return reinterpret_cast<Fn>(f);
}

}  // namespace

struct Nvml::Api {
  void* handle = nullptr;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*count)(unsigned int*) = nullptr;
  NvmlReturn (*by_index)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*uuid)(NvmlDevice, char*, unsigned int) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*power)(NvmlDevice, unsigned int*) = nullptr;         // milliwatts
  NvmlReturn (*power_limit)(NvmlDevice, unsigned int*) = nullptr;   // milliwatts
  NvmlReturn (*energy)(NvmlDevice, unsigned long long*) = nullptr;  // millijoules
};

absl::StatusOr<std::shared_ptr<Nvml>> Nvml::Load(const std::string& library) {
  auto api = std::make_unique<Api>();
  api->handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (api->handle == nullptr) {
    const char* e = dlerror();
    return absl::UnavailableError(absl::StrCat(
        "no NVML (", library, " of the NVIDIA driver): ", e != nullptr ? e : "not found"));
  }
  std::string missing;
  void* h = api->handle;
  api->init = Symbol<decltype(api->init)>(h, "nvmlInit_v2", &missing);
  api->shutdown = Symbol<decltype(api->shutdown)>(h, "nvmlShutdown", &missing);
  api->count = Symbol<decltype(api->count)>(h, "nvmlDeviceGetCount_v2", &missing);
  api->by_index = Symbol<decltype(api->by_index)>(h, "nvmlDeviceGetHandleByIndex_v2", &missing);
  api->uuid = Symbol<decltype(api->uuid)>(h, "nvmlDeviceGetUUID", &missing);
  api->utilization =
      Symbol<decltype(api->utilization)>(h, "nvmlDeviceGetUtilizationRates", &missing);
  api->memory = Symbol<decltype(api->memory)>(h, "nvmlDeviceGetMemoryInfo", &missing);
  api->power = Symbol<decltype(api->power)>(h, "nvmlDeviceGetPowerUsage", &missing);
  api->power_limit =
      Symbol<decltype(api->power_limit)>(h, "nvmlDeviceGetPowerManagementLimit", &missing);
  api->energy = Symbol<decltype(api->energy)>(h, "nvmlDeviceGetTotalEnergyConsumption", &missing);
  if (!missing.empty()) {
    dlclose(h);
    return absl::UnavailableError(absl::StrCat(library, " has no ", missing));
  }
  if (const NvmlReturn r = api->init(); r != 0) {
    dlclose(h);
    return absl::UnavailableError(absl::StrCat("nvmlInit failed (NVML error ", r, ")"));
  }
  unsigned int n = 0;
  if (api->count(&n) != 0 || n == 0) {
    api->shutdown();
    dlclose(h);
    return absl::UnavailableError("NVML sees no GPU");
  }
  return std::shared_ptr<Nvml>(new Nvml(std::move(api)));
}

Nvml::Nvml(std::unique_ptr<Api> api) : api_(std::move(api)) {}

Nvml::~Nvml() {
  api_->shutdown();
  dlclose(api_->handle);
}

std::vector<GpuReading> Nvml::Read() const {
  std::vector<GpuReading> out;
  unsigned int n = 0;
  if (api_->count(&n) != 0) return out;
  for (unsigned int i = 0; i < n; ++i) {
    NvmlDevice device = nullptr;
    char uuid[96] = {};
    if (api_->by_index(i, &device) != 0 || api_->uuid(device, uuid, sizeof(uuid)) != 0) continue;
    GpuReading g;
    g.uuid = uuid;
    if (NvmlUtilization u{}; api_->utilization(device, &u) == 0) g.utilization = u.gpu / 100.0;
    if (NvmlMemory m{}; api_->memory(device, &m) == 0) {
      g.memory_total_bytes = static_cast<double>(m.total);
      g.memory_used_bytes = static_cast<double>(m.used);
    }
    if (unsigned int mw = 0; api_->power(device, &mw) == 0) g.power_watts = mw / 1000.0;
    if (unsigned int mw = 0; api_->power_limit(device, &mw) == 0) g.power_limit_watts = mw / 1000.0;
    if (unsigned long long mj = 0; api_->energy(device, &mj) == 0) {
      g.energy_joules = static_cast<double>(mj) / 1000.0;
    }
    out.push_back(std::move(g));
  }
  return out;
}

namespace {

class GpuCollector final : public prometheus::Collectable {
 public:
  explicit GpuCollector(std::shared_ptr<Nvml> nvml) : nvml_(std::move(nvml)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    using prometheus::MetricType;
    struct Def {
      const char* name;
      const char* help;
      MetricType type;
      double GpuReading::*value;
    };
    static constexpr Def kDefs[] = {
        {"nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0]", MetricType::Gauge,
         &GpuReading::utilization},
        {"nv_gpu_memory_total_bytes", "GPU total memory, in bytes", MetricType::Gauge,
         &GpuReading::memory_total_bytes},
        {"nv_gpu_memory_used_bytes", "GPU used memory, in bytes", MetricType::Gauge,
         &GpuReading::memory_used_bytes},
        {"nv_gpu_power_usage", "GPU power usage in watts", MetricType::Gauge,
         &GpuReading::power_watts},
        {"nv_gpu_power_limit", "GPU power management limit in watts", MetricType::Gauge,
         &GpuReading::power_limit_watts},
        {"nv_energy_consumption", "GPU energy consumption in joules since the driver loaded",
         MetricType::Counter, &GpuReading::energy_joules},
    };
    const std::vector<GpuReading> gpus = nvml_->Read();
    std::vector<prometheus::MetricFamily> families;
    for (const Def& d : kDefs) {
      prometheus::MetricFamily f{.name = d.name, .help = d.help, .type = d.type, .metric = {}};
      for (const GpuReading& g : gpus) {
        const double v = g.*d.value;
        if (v < 0) continue;  // not supported on this GPU
        prometheus::ClientMetric m;
        m.label = {{"gpu_uuid", g.uuid}};
        (d.type == MetricType::Counter ? m.counter.value : m.gauge.value) = v;
        f.metric.push_back(std::move(m));
      }
      if (!f.metric.empty()) families.push_back(std::move(f));
    }
    return families;
  }

 private:
  const std::shared_ptr<Nvml> nvml_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<prometheus::Collectable>> NewGpuCollector(
    const std::string& library) {
  auto nvml = Nvml::Load(library);
  if (!nvml.ok()) return nvml.status();
  return std::make_shared<GpuCollector>(*std::move(nvml));
}

}  // namespace rnnserve::server::metrics
