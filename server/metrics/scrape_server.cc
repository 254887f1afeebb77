#include "server/metrics/scrape_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <list>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace rnnserve::server::metrics {
namespace {

using Clock = std::chrono::steady_clock;

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Internal Server Error";
  }
}

std::string Serialize(const ScrapeAnswer& a, bool head_only) {
  std::string out = absl::StrCat("HTTP/1.1 ", a.status, " ", Reason(a.status),
                                 "\r\nContent-Type: ", a.content_type, "\r\n");
  if (!a.content_encoding.empty())
    absl::StrAppend(&out, "Content-Encoding: ", a.content_encoding, "\r\n");
  if (a.status == 405) out += "Allow: GET, HEAD\r\n";
  absl::StrAppend(&out, "Content-Length: ", a.body.size(), "\r\nConnection: close\r\n\r\n");
  if (!head_only) out += a.body;
  return out;
}

ScrapeAnswer Plain(int status, absl::string_view text) {
  return {.status = status, .body = absl::StrCat(text, "\n")};
}

struct Connection {
  int fd = -1;
  Clock::time_point deadline;
  std::string in;   // the request head so far
  std::string out;  // the answer, once the head has arrived
  size_t sent = 0;
  bool answering = false;
  std::list<Connection>::iterator self;
};

class ScrapeServerImpl final : public ScrapeServer {
 public:
  ScrapeServerImpl(const ScrapeServerOptions& options, Handler handler, int listen_fd, int epoll_fd,
                   int wake_fd, int port)
      : options_(options),
        handler_(std::move(handler)),
        listen_fd_(listen_fd),
        epoll_fd_(epoll_fd),
        wake_fd_(wake_fd),
        port_(port) {
    Watch(listen_fd_, EPOLLIN, const_cast<char*>(&kListenTag));
    Watch(wake_fd_, EPOLLIN, const_cast<char*>(&kWakeTag));
    thread_ = std::thread([this] { Loop(); });
  }

  ~ScrapeServerImpl() override {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = write(wake_fd_, &one, sizeof(one));
    thread_.join();
    while (!connections_.empty()) Close(connections_.begin());
    close(listen_fd_);
    close(wake_fd_);
    close(epoll_fd_);
  }

  int port() const override { return port_; }

 private:
  static constexpr char kListenTag = 'l';
  static constexpr char kWakeTag = 'w';

  void Watch(int fd, uint32_t events, void* tag) {
    epoll_event e{};
    e.events = events;
    e.data.ptr = tag;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &e);
  }

  void Loop() {
    std::vector<epoll_event> events(64);
    for (;;) {
      int timeout_ms = -1;
      if (!connections_.empty()) {
        const auto left = connections_.front().deadline - Clock::now();
        timeout_ms = static_cast<int>(std::max<int64_t>(
            0, std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1));
      }
      if (accept_paused_) timeout_ms = timeout_ms < 0 ? 100 : std::min(timeout_ms, 100);
      const int n =
          epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), timeout_ms);
      bool accept = false;
      // Connections first: accepting may close (evict) one whose event is in this batch.
      for (int i = 0; i < n; ++i) {
        void* tag = events[i].data.ptr;
        if (tag == &kWakeTag) return;
        if (tag == &kListenTag) {
          accept = true;
        } else {
          Serve(static_cast<Connection*>(tag)->self);
        }
      }
      if (accept_paused_ && Clock::now() >= accept_resume_) {
        accept_paused_ = false;
        Watch(listen_fd_, EPOLLIN, const_cast<char*>(&kListenTag));
        accept = true;
      }
      if (accept) Accept();
      const auto now = Clock::now();
      while (!connections_.empty() && connections_.front().deadline <= now) {
        Close(connections_.begin());
      }
    }
  }

  void Accept() {
    for (;;) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          if (!connections_.empty()) {  // out of descriptors: the oldest makes room
            Close(connections_.begin());
            continue;
          }
          // None of ours to close: stop watching the listener for a while instead of spinning.
          epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
          accept_paused_ = true;
          accept_resume_ = Clock::now() + std::chrono::milliseconds(100);
          return;
        }
        return;  // EAGAIN: none left
      }
      if (static_cast<int>(connections_.size()) >= options_.max_connections) {
        Close(connections_.begin());
      }
      const int on = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
      connections_.push_back(Connection{
          .fd = fd,
          .deadline = Clock::now() + std::chrono::milliseconds(options_.request_timeout_ms)});
      Connection& c = connections_.back();
      c.self = std::prev(connections_.end());
      Watch(fd, EPOLLIN | EPOLLRDHUP, &c);
    }
  }

  void Serve(std::list<Connection>::iterator it) {
    Connection& c = *it;
    if (!c.answering) {
      char buf[4096];
      bool sent_all = false;  // the peer shut its side: no more bytes will come
      for (;;) {
        const size_t room = static_cast<size_t>(options_.max_header_bytes) + 4 - c.in.size();
        if (room == 0) break;
        const ssize_t n = recv(c.fd, buf, std::min(room, sizeof(buf)), 0);
        if (n > 0) {
          c.in.append(buf, static_cast<size_t>(n));
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n < 0) {
          Close(it);  // the connection failed
          return;
        }
        sent_all = true;  // a request followed by shutdown(SHUT_WR) is still answered
        break;
      }
      const size_t end = c.in.find("\r\n\r\n");
      const bool too_long = end == std::string::npos
                                ? c.in.size() > static_cast<size_t>(options_.max_header_bytes)
                                : end + 4 > static_cast<size_t>(options_.max_header_bytes);
      if (end == std::string::npos && !too_long) {
        if (sent_all) Close(it);  // it ended before its request did
        return;                   // else more to come
      }
      c.out = too_long ? Serialize(Plain(431, "request head too large"), false)
                       : Answer(absl::string_view(c.in).substr(0, end));
      c.in.clear();
      c.answering = true;
      epoll_event e{};
      e.events = EPOLLOUT;
      e.data.ptr = &c;
      epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &e);
    }
    while (c.sent < c.out.size()) {
      const ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n > 0) {
        c.sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      break;  // the peer went away
    }
    shutdown(c.fd, SHUT_WR);
    Close(it);
  }

  // The answer to a request whose head (without the blank line) is `head`.
  std::string Answer(absl::string_view head) {
    std::vector<absl::string_view> lines = absl::StrSplit(head, "\r\n");
    std::vector<absl::string_view> request_line = absl::StrSplit(lines[0], ' ');
    if (request_line.size() != 3 || !absl::StartsWith(request_line[2], "HTTP/1.")) {
      return Serialize(Plain(400, "expected a request line: GET /metrics HTTP/1.1"), false);
    }
    const bool head_only = request_line[0] == "HEAD";
    if (request_line[0] != "GET" && !head_only) {
      return Serialize(Plain(405, "only GET and HEAD are served"), false);
    }
    ScrapeRequest request;
    request.path = std::string(request_line[1].substr(0, request_line[1].find('?')));
    for (size_t i = 1; i < lines.size(); ++i) {
      const size_t colon = lines[i].find(':');
      if (colon == absl::string_view::npos) continue;
      if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(lines[i].substr(0, colon)),
                                 "accept-encoding") &&
          absl::StrContains(absl::AsciiStrToLower(lines[i].substr(colon + 1)), "gzip")) {
        request.gzip = true;
      }
    }
    try {
      return Serialize(handler_(request), head_only);
    } catch (const std::exception& e) {
      return Serialize(Plain(500, e.what()), head_only);
    }
  }

  void Close(std::list<Connection>::iterator it) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->fd, nullptr);
    close(it->fd);
    connections_.erase(it);
  }

  const ScrapeServerOptions options_;
  const Handler handler_;
  const int listen_fd_;
  const int epoll_fd_;
  const int wake_fd_;  // written once, by the destructor, to end the loop
  const int port_;
  // Only the loop's thread (and the destructor, after it) touches the rest. Accept order, which
  // is deadline order: the front is the oldest.
  std::list<Connection> connections_;
  bool accept_paused_ = false;  // the listener is not watched until accept_resume_
  Clock::time_point accept_resume_;
  std::thread thread_;  // last: started by the constructor once the rest is set
};

}  // namespace

absl::StatusOr<std::unique_ptr<ScrapeServer>> ScrapeServer::Start(
    const ScrapeServerOptions& options, Handler handler) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics port must be in [0, 65535]; was ", options.port));
  }
  if (options.max_connections <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics max_connections must be positive; was ", options.max_connections));
  }
  if (options.request_timeout_ms <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics request_timeout_ms must be positive; was ", options.request_timeout_ms));
  }
  if (options.max_header_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics max_header_bytes must be positive; was ", options.max_header_bytes));
  }
  if (options.host.empty() || absl::StrContains(options.host, ':') ||
      absl::StrContains(options.host, ',')) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics host must be an IPv4 address or a host name; was '", options.host, "'"));
  }
  const std::string address = absl::StrCat(options.host, ":", options.port);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (const int rc =
          getaddrinfo(options.host.c_str(), std::to_string(options.port).c_str(), &hints, &found);
      rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", gai_strerror(rc)));
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  const bool bound =
      fd >= 0 && bind(fd, found->ai_addr, found->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0;
  const int error = errno;
  freeaddrinfo(found);
  if (!bound) {
    if (fd >= 0) close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", std::strerror(error)));
  }
  sockaddr_in bound_to{};
  socklen_t len = sizeof(bound_to);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound_to), &len);
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd < 0 || wake_fd < 0) {
    const int e = errno;
    close(fd);
    if (epoll_fd >= 0) close(epoll_fd);
    if (wake_fd >= 0) close(wake_fd);
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", std::strerror(e)));
  }
  return std::make_unique<ScrapeServerImpl>(options, std::move(handler), fd, epoll_fd, wake_fd,
                                            ntohs(bound_to.sin_port));
}

}  // namespace rnnserve::server::metrics
