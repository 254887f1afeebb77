#include "tests/support/redis_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace rnnserve::testing {
namespace {

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t n = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  close(fd);
  return ntohs(a.sin_port);
}

// Whether the server answers a PING on the port ("+PONG", or "-NOAUTH" when it wants a
// password).
bool Pong(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = false;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    const char ping[] = "PING\r\n";
    char buf[16] = {};
    if (write(fd, ping, sizeof(ping) - 1) == static_cast<ssize_t>(sizeof(ping) - 1) &&
        read(fd, buf, sizeof(buf) - 1) >= 5) {
      ok = std::string(buf).rfind("+PONG", 0) == 0 || std::string(buf).rfind("-NOAUTH", 0) == 0;
    }
  }
  close(fd);
  return ok;
}

}  // namespace

std::string RedisServer::Binary() {
  std::vector<std::string> candidates = {"/usr/bin/redis-server"};
  if (const char* path = getenv("PATH")) {
    std::string p = path;
    for (size_t start = 0; start <= p.size();) {
      const size_t end = std::min(p.find(':', start), p.size());
      candidates.push_back(p.substr(start, end - start) + "/redis-server");
      start = end + 1;
    }
  }
  for (const std::string& c : candidates) {
    if (access(c.c_str(), X_OK) == 0) return c;
  }
  return "";
}

absl::StatusOr<std::unique_ptr<RedisServer>> RedisServer::Start(int port,
                                                                const std::string& password,
                                                                bool append_only) {
  if (Binary().empty()) return absl::NotFoundError("redis-server is not installed");
  if (port == 0) port = FreePort();
  char tmpl[] = "/tmp/rnnserve-redis-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::InternalError("mkdtemp failed");
  auto server = std::unique_ptr<RedisServer>(new RedisServer(port, tmpl, password, append_only));
  if (absl::Status s = server->Run(); !s.ok()) return s;
  return server;
}

absl::Status RedisServer::Run() {
  const std::string binary = Binary();
  const std::string port_str = std::to_string(port_);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    std::vector<const char*> argv = {
        binary.c_str(), "--port", port_str.c_str(), "--bind", "127.0.0.1", "--dir", dir_.c_str(),
        "--save",       "",       "--loglevel",     "warning"};
    for (const char* a : {"--appendonly", append_only_ ? "yes" : "no"}) argv.push_back(a);
    if (append_only_) {
      for (const char* a : {"--appendfsync", "always"}) argv.push_back(a);
    }
    if (!password_.empty()) {
      argv.push_back("--requirepass");
      argv.push_back(password_.c_str());
    }
    argv.push_back(nullptr);
    execv(binary.c_str(), const_cast<char* const*>(argv.data()));
    _exit(127);
  }
  pid_ = pid;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!Pong(port_)) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      pid_ = 0;
      return absl::InternalError(absl::StrCat("redis-server exited at start on port ", port_));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("redis-server did not answer on ", port_));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::OkStatus();
}

absl::Status RedisServer::Restart() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }
  return Run();
}

std::string RedisServer::url() const { return absl::StrCat("redis://127.0.0.1:", port_); }

void RedisServer::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = 0;
}

RedisServer::~RedisServer() {
  Kill();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

}  // namespace rnnserve::testing
