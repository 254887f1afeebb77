#include "tests/fuzz/fuzz_server.h"

#include <cstdlib>

#include "server/log.h"

namespace rnnserve::fuzz {

FuzzServer::FuzzServer() {
  server::SetLogLevel(server::LogLevel::kError);
  auto repo = server::ModelRepository::Open(RNNSERVE_SOURCE_DIR "/models/examples");
  if (!repo.ok() || (*repo)->ready_models() == 0) std::abort();
  repository = std::move(*repo);
  auto seq = server::SequenceManager::Create({});
  if (!seq.ok()) std::abort();
  sequences = std::move(*seq);
  service = std::make_unique<server::RnnServeService>(repository.get(), sequences.get());
  kserve = std::make_unique<server::kserve::KServeService>(
      repository.get(),
      server::kserve::KServeServiceOptions{.server_version = "fuzz", .sequences = sequences.get()});
}

FuzzServer& Server() {
  static FuzzServer* const server = new FuzzServer();
  return *server;
}

}  // namespace rnnserve::fuzz
