#include "server/metrics/endpoint.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <zlib.h>

#include <cerrno>
#include <chrono>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"
#include "prometheus/summary.h"
#include "prometheus/text_serializer.h"
#include "server/metrics/scrape_server.h"

namespace rnnserve::server::metrics {
namespace {

// Bytes of thread-local storage of every module loaded now: an upper bound of glibc's static
// TLS block, which it places inside each new thread's stack.
size_t LoadedTlsBytes() {
  size_t total = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type == PT_TLS) {
            const size_t align = ph.p_align > 0 ? ph.p_align : 1;
            *static_cast<size_t*>(data) += (ph.p_memsz + align - 1) / align * align;
          }
        }
        return 0;
      },
      &total);
  return total;
}

// `text` as a gzip member (RFC 1952); empty when zlib fails.
std::string Gzip(const std::string& text) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return "";
  }
  std::string out(deflateBound(&z, text.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const bool done = deflate(&z, Z_FINISH) == Z_STREAM_END;
  out.resize(z.total_out);
  deflateEnd(&z);
  return done ? out : "";
}

class MetricsEndpoint final : public Endpoint {
 public:
  explicit MetricsEndpoint(std::vector<std::shared_ptr<prometheus::Collectable>> collectables)
      : collectables_(std::move(collectables)),
        own_(std::make_shared<prometheus::Registry>()),
        bytes_(prometheus::BuildCounter()
                   .Name("exposer_transferred_bytes_total")
                   .Help("Transferred bytes to metrics services")
                   .Register(*own_)
                   .Add({})),
        scrapes_(prometheus::BuildCounter()
                     .Name("exposer_scrapes_total")
                     .Help("Number of times metrics were scraped")
                     .Register(*own_)
                     .Add({})),
        latencies_(
            prometheus::BuildSummary()
                .Name("exposer_request_latencies")
                .Help("Latencies of serving scrape requests, in microseconds")
                .Register(*own_)
                .Add({}, prometheus::Summary::Quantiles{{0.5, 0.05}, {0.9, 0.01}, {0.99, 0.001}})) {
    absl::MutexLock lock(&mu_);
    collectables_.insert(collectables_.begin(), own_);
  }

  absl::Status Start(const EndpointOptions& options) {
    auto server = ScrapeServer::Start({.host = options.host,
                                       .port = options.port,
                                       .max_connections = options.max_connections,
                                       .request_timeout_ms = options.request_timeout_ms},
                                      [this](const ScrapeRequest& r) { return Answer(r); });
    if (!server.ok()) return server.status();
    server_ = std::move(*server);
    return absl::OkStatus();
  }

  int port() const override { return server_->port(); }

  void RegisterCollectable(std::shared_ptr<prometheus::Collectable> c) override {
    absl::MutexLock lock(&mu_);
    collectables_.push_back(std::move(c));
  }

 private:
  // On the server's one thread.
  ScrapeAnswer Answer(const ScrapeRequest& request) {
    if (request.path != "/metrics") return {.status = 404, .body = "not found; try /metrics\n"};
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::shared_ptr<prometheus::Collectable>> collectables;
    {
      absl::MutexLock lock(&mu_);
      collectables = collectables_;
    }
    std::vector<prometheus::MetricFamily> families;
    for (const auto& c : collectables) {
      auto f = c->Collect();
      families.insert(families.end(), std::make_move_iterator(f.begin()),
                      std::make_move_iterator(f.end()));
    }
    std::ostringstream text;
    prometheus::TextSerializer().Serialize(text, families);
    ScrapeAnswer answer{.body = std::move(text).str()};
    if (request.gzip) {
      if (std::string gz = Gzip(answer.body); !gz.empty()) {
        answer.body = std::move(gz);
        answer.content_encoding = "gzip";
      }
    }
    bytes_.Increment(static_cast<double>(answer.body.size()));
    scrapes_.Increment();
    latencies_.Observe(static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(
                                               std::chrono::steady_clock::now() - start)
                                               .count()));
    return answer;
  }

  absl::Mutex mu_;
  // own_ first.
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_ ABSL_GUARDED_BY(mu_);
  const std::shared_ptr<prometheus::Registry> own_;  // the exposer_* families
  prometheus::Counter& bytes_;
  prometheus::Counter& scrapes_;
  prometheus::Summary& latencies_;
  std::unique_ptr<ScrapeServer> server_;  // last: stopped first
};

}  // namespace

absl::StatusOr<std::unique_ptr<Endpoint>> StartEndpoint(const ServerMetrics& metrics,
                                                        const EndpointOptions& options) {
  auto endpoint = std::make_unique<MetricsEndpoint>(metrics.collectables());
  if (absl::Status s = endpoint->Start(options); !s.ok()) return s;
  return endpoint;
}

}  // namespace rnnserve::server::metrics

// A library that starts its threads with a small fixed stack (civetweb, which served /metrics
// before scrape_server.h, asked for 100 KiB) loses it to glibc, which carves the thread's static
// TLS out of that stack: in the rnnserve binary with the CUDA engine (cuBLASLt alone brings
// 94 KiB of TLS) pthread_create then fails with EINVAL.
// This definition in the executable takes the place of glibc's for every caller in the process
// and grows a requested stack by the TLS it will hold, so the caller gets the usable stack it
// asked for. (A caller giving its own memory uses pthread_attr_setstack, which is untouched.)
extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr, size_t stacksize) {
  using Fn = int (*)(pthread_attr_t*, size_t);
  static const Fn glibc = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  static const size_t tls = rnnserve::server::metrics::LoadedTlsBytes();
  if (glibc == nullptr) return EINVAL;
  return glibc(attr, stacksize + tls);
}
