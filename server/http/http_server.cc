#include "server/http/http_server.h"

#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <deque>
#include <future>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "server/limits/caller_identity.h"
#include "server/log.h"

namespace rnnserve::server::http {
namespace {

void Answer(const Response& from, httplib::Response& to) {
  to.status = from.status;
  for (const auto& [k, v] : from.headers) to.set_header(k, v);
  to.set_content(from.body, from.content_type);
}

void AnswerError(const absl::Status& status, httplib::Response& to) {
  Answer(ErrorResponse(status), to);
}

absl::StatusCode FromGrpc(grpc::StatusCode code) { return static_cast<absl::StatusCode>(code); }

// The connection cap: `threads` workers, each serving one connection, and at most `threads`
// accepted connections waiting for one. When both are full, Enqueue (httplib's accept loop)
// waits, so no more connections are accepted: the kernel's backlog holds them, then refuses.
// The server thus holds at most 2 * threads + 1 client sockets (one in the accept loop's hand).
class BoundedPool final : public httplib::TaskQueue {
 public:
  explicit BoundedPool(size_t threads) : limit_(threads) {
    for (size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { Work(); });
  }
  void enqueue(std::function<void()> fn) override {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](BoundedPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
          return p->queue_.size() < p->limit_ || p->shutdown_;
        },
        this));
    queue_.push_back(std::move(fn));  // after shutdown too: the workers drain the queue
  }
  void shutdown() override {
    {
      absl::MutexLock lock(&mu_);
      shutdown_ = true;
    }
    for (std::thread& t : workers_) t.join();
  }

 private:
  void Work() {
    for (;;) {
      std::function<void()> fn;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](BoundedPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
              return !p->queue_.empty() || p->shutdown_;
            },
            this));
        if (queue_.empty()) return;  // shut down, and nothing left to close
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();  // serves the connection and closes it
    }
  }

  const size_t limit_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

class HttpServerImpl final : public HttpServer {
 public:
  HttpServerImpl(const HttpServerOptions& options, std::vector<Routes*> routes,
                 std::unique_ptr<httplib::Server> server)
      : options_(options), routes_(std::move(routes)), server_(std::move(server)) {}
  ~HttpServerImpl() override { Stop(); }

  absl::Status Listen() {
    httplib::Server& s = *server_;
    // One thread per connection served at once; as many more wait (http_server.h).
    const size_t threads = static_cast<size_t>(options_.max_connections);
    s.new_task_queue = [threads] { return new BoundedPool(threads); };
    s.set_read_timeout(options_.read_timeout_s, 0);
    s.set_write_timeout(options_.read_timeout_s, 0);
    s.set_keep_alive_timeout(options_.read_timeout_s);
    s.set_keep_alive_max_count(1000);
    s.set_payload_max_length(static_cast<size_t>(options_.max_body_bytes));
    // TCP_NODELAY on the listening socket, which accepted sockets inherit (Linux): httplib
    // writes a response's headers and body apart, and with Nagle's algorithm the body waits
    // for the client's delayed ACK of the headers (40 ms a request).
    s.set_socket_options([this](socket_t sock) {
      int on = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
      setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
      listening_ = sock;
    });
    s.set_error_handler([](const httplib::Request&, httplib::Response& res) {
      // httplib's own answers (413 for a long body, 400 for a bad request line): JSON too.
      if (res.body.empty()) {
        res.set_content(ErrorJson(res.status == 413 ? "the body is larger than --max-message-bytes"
                                                    : absl::StrCat("HTTP status ", res.status)),
                        "application/json");
      }
    });
    s.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
          AnswerError(absl::InternalError("the request could not be handled"), res);
        });
    auto plain = [this](const httplib::Request& req, httplib::Response& res) {
      Serve(req, res, nullptr);
    };
    auto reading = [this](const httplib::Request& req, httplib::Response& res,
                          const httplib::ContentReader& reader) { Serve(req, res, &reader); };
    s.Get(".*", plain);
    s.Post(".*", reading);
    s.Put(".*", reading);
    s.Delete(".*", reading);
    port_ = options_.port == 0
                ? s.bind_to_any_port(options_.address)
                : (s.bind_to_port(options_.address, options_.port) ? options_.port : -1);
    if (port_ < 0) {
      return absl::UnavailableError(
          absl::StrCat("--http-port: cannot listen on ", options_.address, ":", options_.port));
    }
    // httplib listens with a backlog of 5: a burst of new connections (64 clients starting at
    // once) overflows it and they are reset. Listening again sets the backlog (Linux).
    if (listening_ >= 0) ::listen(listening_, SOMAXCONN);
    listener_ = std::thread([&s] { s.listen_after_bind(); });
    return absl::OkStatus();
  }

  int port() const override { return port_; }
  void Stop() override {
    server_->stop();
    if (listener_.joinable()) listener_.join();
  }

 private:
  void Serve(const httplib::Request& hreq, httplib::Response& hres,
             const httplib::ContentReader* reader) {
    Request req;
    req.method = hreq.method;
    req.path = hreq.path;
    if (size_t q = hreq.target.find('?'); q != std::string::npos) {
      req.query = hreq.target.substr(q + 1);
    }
    req.headers.reserve(hreq.headers.size());
    for (const auto& [k, v] : hreq.headers) req.headers.emplace_back(absl::AsciiStrToLower(k), v);
    const std::string authorization = hreq.get_header_value("Authorization");
    // The peer as gRPC writes it ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000").
    const std::string peer = hreq.remote_addr.find(':') == std::string::npos
                                 ? absl::StrCat("ipv4:", hreq.remote_addr, ":", hreq.remote_port)
                                 : absl::StrCat("ipv6:[", hreq.remote_addr, "]:", hreq.remote_port);
    req.caller = limits::CallerIdentity(authorization, peer);

    Routes* route = nullptr;
    auth::Access access = auth::Access::kInference;
    for (Routes* r : routes_) {
      if (r->Owns(req, &access)) {
        route = r;
        break;
      }
    }
    if (route == nullptr) {
      return AnswerError(
          absl::NotFoundError(absl::StrCat(req.method, " ", req.path, ": no such endpoint")), hres);
    }
    grpc::Status a = options_.authorizer != nullptr
                         ? options_.authorizer->Check(authorization, access)
                         : grpc::Status::OK;
    if (a.ok() && access == auth::Access::kAdmin) {
      a = auth::CheckModelControl({.authorizer = options_.authorizer,
                                   .remote_model_control = options_.remote_model_control},
                                  peer);
    }
    if (!a.ok()) {
      return AnswerError(absl::Status(FromGrpc(a.error_code()), a.error_message()), hres);
    }
    // The body's bytes are held in the budget from before they are read until the answer.
    const int64_t declared = static_cast<int64_t>(
        std::min<uint64_t>(hreq.get_header_value<uint64_t>("Content-Length"), uint64_t{1} << 62));
    if (declared > options_.max_body_bytes) {
      hres.status = 413;
      hres.set_content(ErrorJson(absl::StrCat("the body of ", declared,
                                              " bytes is larger than --max-message-bytes (",
                                              options_.max_body_bytes, ")")),
                       "application/json");
      return;
    }
    auto reservation = limits::ReserveIn(options_.bytes, req.caller, declared);
    if (!reservation.ok()) return AnswerError(reservation.status(), hres);
    // A request with neither Content-Length nor chunked transfer encoding has no body.
    const bool has_body =
        hreq.has_header("Content-Length") ||
        hreq.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos;
    if (reader != nullptr && has_body) {
      req.body.reserve(static_cast<size_t>(declared));
      absl::Status held;
      const bool read = (*reader)([&](const char* data, size_t n) {
        req.body.append(data, n);
        if (static_cast<int64_t>(req.body.size()) > reservation->bytes()) {
          held = reservation->Add(static_cast<int64_t>(req.body.size()) - reservation->bytes());
        }
        return held.ok();
      });
      if (!held.ok()) return AnswerError(held, hres);
      if (!read) return;  // httplib answers (413) or the connection is gone
    }
    std::promise<Response> answered;
    std::future<Response> answer = answered.get_future();
    route->Handle(req, [&answered](Response r) { answered.set_value(std::move(r)); });
    Answer(answer.get(), hres);
  }

  const HttpServerOptions options_;
  const std::vector<Routes*> routes_;
  const std::unique_ptr<httplib::Server> server_;
  int port_ = -1;
  int listening_ = -1;  // the listening socket, once bound
  std::thread listener_;
};

}  // namespace

std::string ErrorJson(absl::string_view message) {
  return nlohmann::json{{"error", std::string(message)}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int HttpStatus(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kCancelled:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

Response ErrorResponse(const absl::Status& status) {
  return Response{.status = HttpStatus(status.code()),
                  .body = ErrorJson(absl::StrCat(absl::StatusCodeToString(status.code()), ": ",
                                                 status.message()))};
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              std::vector<Routes*> routes) {
  if (options.max_body_bytes <= 0 || options.max_connections <= 0 || options.read_timeout_s <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HTTP server: max_body_bytes, max_connections and read_timeout_s must be positive; were ",
        options.max_body_bytes, ", ", options.max_connections, ", ", options.read_timeout_s));
  }
  std::unique_ptr<httplib::Server> server;
  if (options.tls.cert_file.empty()) {
    server = std::make_unique<httplib::Server>();
  } else {
    // The same files gRPC takes; ServerCredentials has checked them already.
    auto ssl = std::make_unique<httplib::SSLServer>(
        options.tls.cert_file.c_str(), options.tls.key_file.c_str(),
        options.tls.client_ca_file.empty() ? nullptr : options.tls.client_ca_file.c_str());
    if (!ssl->is_valid()) {
      return absl::InvalidArgumentError(
          "--tls-cert / --tls-key / --tls-client-ca: the HTTP server cannot use them");
    }
    server = std::move(ssl);
  }
  auto impl = std::make_unique<HttpServerImpl>(options, std::move(routes), std::move(server));
  if (auto s = impl->Listen(); !s.ok()) return s;
  return impl;
}

}  // namespace rnnserve::server::http
