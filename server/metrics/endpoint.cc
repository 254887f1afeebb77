#include "server/metrics/endpoint.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>

#include <cerrno>
#include <exception>
#include <vector>

#include "CivetServer.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace rnnserve::server::metrics {
namespace {

// civetweb's messages while the exposer starts, for the error; set only on the starting thread.
thread_local std::string* startup_messages = nullptr;

int LogMessage(const mg_connection*, const char* message) {
  if (startup_messages == nullptr) return 0;  // a worker's message: civetweb's default
  if (!startup_messages->empty()) startup_messages->append("; ");
  startup_messages->append(message);
  return 1;
}

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

}  // namespace

absl::StatusOr<std::unique_ptr<prometheus::Exposer>> StartEndpoint(const ServerMetrics& metrics,
                                                                   const EndpointOptions& options) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics port must be in [0, 65535]; was ", options.port));
  }
  if (options.threads <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics threads must be positive; was ", options.threads));
  }
  if (options.request_timeout_ms <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics request_timeout_ms must be positive; was ", options.request_timeout_ms));
  }
  if (options.host.empty() || absl::StrContains(options.host, ':') ||
      absl::StrContains(options.host, ',')) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics host must be an IPv4 address or a host name (the endpoint's "
                     "civetweb has no IPv6); was '",
                     options.host, "'"));
  }
  const std::string address = absl::StrCat(options.host, ":", options.port);
  CivetCallbacks callbacks;
  callbacks.log_message = LogMessage;
  std::string messages;
  startup_messages = &messages;
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(
        std::vector<std::string>{
            "listening_ports",
            address,
            "num_threads",
            std::to_string(options.threads),
            "request_timeout_ms",
            std::to_string(options.request_timeout_ms),
        },
        &callbacks);
  } catch (const std::exception& e) {  // civetweb could not start (address in use, ...)
    startup_messages = nullptr;
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", address, ": ",
                                               messages.empty() ? e.what() : messages));
  }
  startup_messages = nullptr;
  for (const auto& c : metrics.collectables()) exposer->RegisterCollectable(c);
  return exposer;
}

}  // namespace rnnserve::server::metrics

// civetweb as Debian builds it (libcivetweb1 1.15) starts every thread with a fixed 100 KiB
// stack (pthread_attr_setstacksize(102400)), and glibc carves the thread's static TLS out of
// that stack: in the rnnserve binary with the CUDA engine (cuBLASLt alone brings 94 KiB of TLS)
// pthread_create then fails with EINVAL and the exposer cannot start ("Cannot create threads").
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
