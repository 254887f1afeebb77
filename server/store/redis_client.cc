#include "server/store/redis_client.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace rnnserve::server::store {
namespace {

RedisReply Copy(const redisReply& r) {
  RedisReply out;
  switch (r.type) {
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r.integer;
      break;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
      out.type =
          r.type == REDIS_REPLY_STRING ? RedisReply::Type::kString : RedisReply::Type::kStatus;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      for (size_t i = 0; i < r.elements; ++i) out.elements.push_back(Copy(*r.element[i]));
      break;
    default:
      out.type = RedisReply::Type::kNil;
  }
  return out;
}

}  // namespace

std::string RedisEndpoint::ToString() const {
  return absl::StrCat("redis://", host, ":", port, "/", db);
}

absl::StatusOr<RedisEndpoint> ParseRedisUrl(absl::string_view url) {
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sequence-store: expected redis://HOST:PORT[/DB]; '", url, "' ", why));
  };
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "redis://")) return bad("does not start with redis://");
  RedisEndpoint e;
  if (const size_t slash = rest.find('/'); slash != absl::string_view::npos) {
    if (!absl::SimpleAtoi(rest.substr(slash + 1), &e.db) || e.db < 0) {
      return bad("has a database that is not a number >= 0");
    }
    rest = rest.substr(0, slash);
  }
  const size_t colon = rest.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return bad("names no HOST:PORT");
  if (!absl::SimpleAtoi(rest.substr(colon + 1), &e.port) || e.port < 1 || e.port > 65535) {
    return bad("has a port that is not 1..65535");
  }
  e.host = std::string(rest.substr(0, colon));
  return e;
}

absl::StatusOr<std::unique_ptr<RedisClient>> RedisClient::Create(Options options) {
  if (options.endpoint.host.empty()) return absl::InvalidArgumentError("Redis host is empty");
  if (options.connect_timeout <= absl::ZeroDuration() ||
      options.command_timeout <= absl::ZeroDuration() || options.pipelines <= 0) {
    return absl::InvalidArgumentError("Redis timeouts and pipelines must be positive");
  }
  return std::unique_ptr<RedisClient>(new RedisClient(std::move(options)));
}

RedisClient::~RedisClient() {
  absl::MutexLock lock(&mu_);
  for (redisContext* c : idle_) redisFree(c);
}

absl::Status RedisClient::Unavailable(absl::string_view what) const {
  return absl::UnavailableError(absl::StrCat("sequence store ", options_.endpoint.ToString(),
                                             " unavailable: ", what, "; retry later"));
}

absl::StatusOr<redisContext*> RedisClient::Connect() {
  const RedisEndpoint& e = options_.endpoint;
  redisContext* c =
      redisConnectWithTimeout(e.host.c_str(), e.port, absl::ToTimeval(options_.connect_timeout));
  if (c == nullptr) return Unavailable("cannot allocate a connection");
  if (c->err != 0) {
    const std::string why = c->errstr;
    redisFree(c);
    return Unavailable(why);
  }
  redisSetTimeout(c, absl::ToTimeval(options_.command_timeout));
  const auto setup = [&](std::vector<std::string> argv) -> absl::Status {
    std::vector<const char*> p;
    std::vector<size_t> n;
    for (const std::string& a : argv) {
      p.push_back(a.data());
      n.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(p.size()), p.data(), n.data()));
    if (r == nullptr) return Unavailable(c->errstr);
    const bool error = r->type == REDIS_REPLY_ERROR;
    const std::string text = error ? std::string(r->str, r->len) : "";
    freeReplyObject(r);
    // The text of a failed AUTH never holds the password.
    if (error) return Unavailable(absl::StrCat(argv[0], ": ", text));
    return absl::OkStatus();
  };
  absl::Status s = absl::OkStatus();
  if (!options_.password.empty()) s = setup({"AUTH", options_.password});
  if (s.ok() && e.db != 0) s = setup({"SELECT", std::to_string(e.db)});
  if (!s.ok()) {
    redisFree(c);
    return s;
  }
  return c;
}

bool RedisClient::MayGo(Waiter* w) {
  return w->me->done ||
         (w->client->senders_ < w->client->options_.pipelines && !w->client->queue_.empty());
}

absl::StatusOr<RedisReply> RedisClient::Command(const std::vector<absl::string_view>& args) {
  // A batch holds at most this many commands (a bound on one write's size).
  constexpr size_t kMaxBatch = 128;
  Pending me{.args = &args, .reply = absl::UnknownError("not sent")};
  Waiter waiter{this, &me};
  absl::MutexLock lock(&mu_);
  queue_.push_back(&me);
  while (true) {
    mu_.Await(absl::Condition(&MayGo, &waiter));
    if (me.done) return std::move(me.reply);
    // A sender: everything queued (this command among it, unless the queue is long) goes as
    // one batch.
    const size_t n = std::min(queue_.size(), kMaxBatch);
    std::vector<Pending*> batch(queue_.begin(), queue_.begin() + n);
    queue_.erase(queue_.begin(), queue_.begin() + n);
    ++senders_;
    redisContext* c = nullptr;
    if (!idle_.empty()) {
      c = idle_.back();
      idle_.pop_back();
    }
    mu_.Unlock();
    c = RunBatch(c, batch);
    mu_.Lock();
    --senders_;
    if (c != nullptr) {
      if (static_cast<int>(idle_.size()) < options_.pipelines) {
        idle_.push_back(c);
      } else {
        redisFree(c);
      }
    }
    for (Pending* p : batch) p->done = true;
  }
}

redisContext* RedisClient::RunBatch(redisContext* c, const std::vector<Pending*>& batch) {
  size_t answered = 0;
  std::string why;
  // A kept connection may have died with a Redis that restarted since: what it did not answer
  // is sent again once on a new connection. Every command the store sends gives the same
  // outcome or a refusal when run twice (its scripts compare and set the epoch), never a
  // wrong one.
  for (bool kept = c != nullptr;; kept = false) {
    if (c == nullptr) {
      auto made = Connect();
      if (!made.ok()) {
        for (size_t i = answered; i < batch.size(); ++i) batch[i]->reply = made.status();
        return nullptr;
      }
      c = *made;
    }
    if (SendAll(c, batch, &answered, &why)) return c;
    redisFree(c);
    c = nullptr;
    if (!kept) break;
  }
  for (size_t i = answered; i < batch.size(); ++i) batch[i]->reply = Unavailable(why);
  return nullptr;
}

bool RedisClient::SendAll(redisContext* c, const std::vector<Pending*>& batch, size_t* answered,
                          std::string* why) {
  std::vector<const char*> p;
  std::vector<size_t> n;
  for (size_t i = *answered; i < batch.size(); ++i) {
    p.clear();
    n.clear();
    for (absl::string_view a : *batch[i]->args) {
      p.push_back(a.data());
      n.push_back(a.size());
    }
    if (redisAppendCommandArgv(c, static_cast<int>(p.size()), p.data(), n.data()) != REDIS_OK) {
      *why = c->errstr[0] != '\0' ? c->errstr : "cannot queue a command";
      return false;
    }
  }
  for (; *answered < batch.size(); ++*answered) {
    void* reply = nullptr;
    if (redisGetReply(c, &reply) != REDIS_OK || reply == nullptr) {
      *why = c->errstr[0] != '\0' ? c->errstr : "no reply from Redis";
      return false;
    }
    const auto* r = static_cast<redisReply*>(reply);
    if (r->type == REDIS_REPLY_ERROR) {
      batch[*answered]->reply =
          Unavailable(absl::StrCat("error reply: ", absl::string_view(r->str, r->len)));
    } else {
      batch[*answered]->reply = Copy(*r);
    }
    freeReplyObject(reply);
  }
  return true;
}

absl::StatusOr<RedisReply> RedisClient::Eval(const char* script,
                                             const std::vector<absl::string_view>& args) {
  std::string sha;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = sha_.find(script); it != sha_.end()) sha = it->second;
  }
  std::vector<absl::string_view> argv;
  argv.reserve(args.size() + 2);
  argv.push_back("EVALSHA");
  argv.push_back(sha);
  argv.insert(argv.end(), args.begin(), args.end());
  if (!sha.empty()) {
    auto r = Command(argv);
    if (r.ok() || !absl::StrContains(r.status().message(), "NOSCRIPT")) return r;
  }
  auto loaded = Command({"SCRIPT", "LOAD", script});
  if (!loaded.ok()) return loaded.status();
  if (loaded->type != RedisReply::Type::kString) {
    return Unavailable("SCRIPT LOAD answered without a SHA1");
  }
  {
    absl::MutexLock lock(&mu_);
    sha_[script] = loaded->str;
  }
  argv[1] = loaded->str;
  return Command(argv);
}

}  // namespace rnnserve::server::store
