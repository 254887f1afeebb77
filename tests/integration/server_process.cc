#include "tests/integration/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace rnnserve::testing {

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const std::string& repo, const std::vector<std::string>& extra,
    const client::ClientOptions& probe_options, const std::string& log_file) {
  auto server = Launch(repo, extra, probe_options, log_file);
  if (!server.ok()) return server;
  for (int i = 0; i < 1200; ++i) {
    if (!(*server)->Alive()) return absl::InternalError("rnnserve exited while loading");
    if ((*server)->Serving(probe_options)) return server;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return absl::DeadlineExceededError("rnnserve did not become ready within 60 s");
}

bool ServerProcess::Serving(const client::ClientOptions& probe) const {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(address(), client::ChannelCredentials(probe)));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  grpc::health::v1::HealthCheckRequest req;
  grpc::health::v1::HealthCheckResponse resp;
  return stub->Check(&ctx, req, &resp).ok() &&
         resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Launch(
    const std::string& repo, const std::vector<std::string>& extra,
    const client::ClientOptions& probe_options, const std::string& log_file) {
  const int port = FreeLoopbackPort();
  // No drain on SIGTERM unless a test asks for one (a later --drain-seconds wins).
  std::vector<std::string> args = {RNNSERVE_BIN,
                                   "--model-repository",
                                   repo,
                                   "--port",
                                   std::to_string(port),
                                   "--metrics-port",
                                   "0",
                                   "--http-port",
                                   "0",
                                   "--log-level",
                                   "warning",
                                   "--drain-seconds",
                                   "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    if (!log_file.empty()) {
      const int fd = open(log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0 || dup2(fd, STDERR_FILENO) < 0) _exit(126);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  std::unique_ptr<ServerProcess> server(new ServerProcess(pid, port));
  for (int i = 0; i < 1200; ++i) {
    if (!server->Alive()) return absl::InternalError("rnnserve exited during start-up");
    // A fresh channel each time: a refused connection would put a kept one into back-off.
    client::ClientOptions o = probe_options;
    o.server = server->address();
    o.timeout_ms = 500;
    client::RnnServeClient probe(o);
    if (probe.List().ok()) return server;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return absl::DeadlineExceededError("rnnserve did not answer within 60 s");
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) Stop();
}

std::string ServerProcess::address() const { return absl::StrCat("127.0.0.1:", port_); }

bool ServerProcess::Alive() {
  if (pid_ <= 0) return false;
  int status;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

void ServerProcess::Terminate() {
  if (pid_ > 0 && !terminated_) kill(pid_, SIGTERM);
  terminated_ = true;
}

int ServerProcess::Stop() {
  if (pid_ <= 0) return -1;
  Terminate();
  int status = 0;
  for (int i = 0; i < 300; ++i) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (i == 299) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int RunCommand(const std::vector<std::string>& argv, std::string* out) {
  std::string cmd;
  for (const auto& a : argv) absl::StrAppend(&cmd, "'", a, "' ");
  absl::StrAppend(&cmd, "2>&1");
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return -1;
  char buf[4096];
  size_t n;
  out->clear();
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out->append(buf, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace rnnserve::testing
