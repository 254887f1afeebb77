// The Redis client's pipelining (server/store/redis_client.h) against a real redis-server:
// concurrent callers' commands share batches on at most `pipelines` connections, each caller
// gets its own reply, and a restarted Redis is reconnected to. Skips, naming the reason,
// without redis-server.

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/store/redis_client.h"
#include "tests/support/redis_server.h"

namespace rnnserve::server::store {
namespace {

// A field of INFO's text ("name:value" lines).
int64_t InfoField(RedisClient& c, const std::string& section, const std::string& name) {
  auto info = c.Command({"INFO", section});
  if (!info.ok()) return -1;
  const size_t at = info->str.find("\n" + name + ":");
  if (at == std::string::npos) return -1;
  const size_t from = at + name.size() + 2;
  int64_t v = -1;
  (void)absl::SimpleAtoi(info->str.substr(from, info->str.find('\r', from) - from), &v);
  return v;
}

TEST(RedisClientPipelineTest, ConcurrentCallersShareBatchesOnAtMostThePipelinesConnections) {
  if (testing::RedisServer::Binary().empty()) {
    GTEST_SKIP() << "redis-server is not installed (deploy/install_deps.sh installs it)";
  }
  auto redis = testing::RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  auto endpoint = ParseRedisUrl((*redis)->url());
  ASSERT_TRUE(endpoint.ok());
  auto client = RedisClient::Create({.endpoint = *endpoint, .pipelines = 2});
  ASSERT_TRUE(client.ok());
  const int64_t connections = InfoField(**client, "stats", "total_connections_received");
  constexpr int kThreads = 48, kEach = 40;
  std::vector<std::string> wrong(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string key = absl::StrCat("k", t);
      for (int i = 1; i <= kEach && wrong[t].empty(); ++i) {
        auto r = (*client)->Command({"INCR", key});
        if (!r.ok() || r->type != RedisReply::Type::kInteger || r->integer != i) {
          wrong[t] = absl::StrCat("INCR ", key, " #", i, ": ",
                                  r.ok() ? absl::StrCat(r->integer) : r.status().ToString());
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_TRUE(wrong[t].empty()) << wrong[t];
  // Two connections (one made for the first INFO) carried every command, and Redis read them in
  // fewer reads than commands.
  EXPECT_LE(InfoField(**client, "stats", "total_connections_received") - connections, 1)
      << "the first INFO's connection and at most one more";
  const int64_t reads = InfoField(**client, "stats", "total_reads_processed");
  const int64_t commands = InfoField(**client, "stats", "total_commands_processed");
  EXPECT_GE(commands, kThreads * kEach);
  EXPECT_LT(reads, commands) << "no batch held more than one command";
}

TEST(RedisClientPipelineTest, ErrorReplyIsThatCallersOnly) {
  if (testing::RedisServer::Binary().empty()) {
    GTEST_SKIP() << "redis-server is not installed (deploy/install_deps.sh installs it)";
  }
  auto redis = testing::RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  auto client = RedisClient::Create({.endpoint = *ParseRedisUrl((*redis)->url()), .pipelines = 1});
  ASSERT_TRUE(client.ok());
  std::vector<absl::StatusCode> codes(16);
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      auto r = t % 2 == 0 ? (*client)->Command({"PING"}) : (*client)->Command({"NOSUCHCOMMAND"});
      codes[t] = r.status().code();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < 16; ++t) {
    EXPECT_EQ(codes[t], t % 2 == 0 ? absl::StatusCode::kOk : absl::StatusCode::kUnavailable) << t;
  }
}

}  // namespace
}  // namespace rnnserve::server::store
