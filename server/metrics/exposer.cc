#include "server/metrics/exposer.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace rnnserve::server::metrics {
namespace {

constexpr size_t kMaxRequestBytes = 16 << 10;

void WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

std::string Response(absl::string_view status, absl::string_view content_type,
                     absl::string_view body, bool head) {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n",
                      head ? "" : body);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Exposer>> Exposer::Start(const Registry* registry,
                                                        const ExposerOptions& options) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics port must be in [0, 65535]; was ", options.port));
  }
  if (options.read_timeout_ms <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("read_timeout_ms must be positive; was ", options.read_timeout_ms));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(options.port);
  if (int rc = getaddrinfo(options.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics host '", options.host, "': ", gai_strerror(rc)));
  }
  int fd = -1;
  std::string error = "no address";
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 64) != 0) {
      error = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.host, ":", options.port, ": ", error));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const int bound_port = bound.ss_family == AF_INET6
                             ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                             : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    close(fd);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  std::unique_ptr<Exposer> e(
      new Exposer(registry, fd, wake[0], wake[1], bound_port, options.read_timeout_ms));
  e->thread_ = std::thread([p = e.get()] { p->Serve(); });
  return e;
}

Exposer::Exposer(const Registry* registry, int listen_fd, int wake_fd_read, int wake_fd_write,
                 int port, int read_timeout_ms)
    : registry_(registry),
      listen_fd_(listen_fd),
      wake_read_(wake_fd_read),
      wake_write_(wake_fd_write),
      port_(port),
      read_timeout_ms_(read_timeout_ms) {}

Exposer::~Exposer() {
  const char byte = 0;
  while (write(wake_write_, &byte, 1) < 0 && errno == EINTR) {
  }
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  close(wake_read_);
  close(wake_write_);
}

void Exposer::Serve() {
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_, POLLIN, 0}};
  while (true) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents & POLLIN) {
      const int conn = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) continue;
      Answer(conn);
      close(conn);
    }
  }
}

void Exposer::Answer(int fd) const {
  timeval tv{read_timeout_ms_ / 1000, (read_timeout_ms_ % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  std::string request;
  char buf[4096];
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < kMaxRequestBytes) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    request.append(buf, static_cast<size_t>(n));
  }
  // Request line: METHOD SP TARGET SP VERSION
  const absl::string_view line = absl::string_view(request).substr(0, request.find("\r\n"));
  const std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
  if (parts.size() != 3 || !absl::StartsWith(parts[2], "HTTP/")) {
    WriteAll(fd, Response("400 Bad Request", "text/plain", "bad request\n", false));
    return;
  }
  const bool head = parts[0] == "HEAD";
  if (parts[0] != "GET" && !head) {
    WriteAll(fd, Response("405 Method Not Allowed", "text/plain", "GET or HEAD only\n", false));
    return;
  }
  const absl::string_view path = parts[1].substr(0, parts[1].find('?'));
  if (path == "/metrics") {
    WriteAll(fd, Response("200 OK", kTextContentType, registry_->Render(), head));
  } else if (path == "/") {
    WriteAll(fd, Response("200 OK", "text/html; charset=utf-8",
                          "<html><body><a href=\"/metrics\">/metrics</a></body></html>\n", head));
  } else {
    WriteAll(fd, Response("404 Not Found", "text/plain", "not found; try /metrics\n", head));
  }
}

}  // namespace rnnserve::server::metrics
