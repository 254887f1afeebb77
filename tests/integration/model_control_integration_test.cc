// Model control is safe by default (server/auth/access_control.h): a server listening on every
// interface without admin tokens refuses LoadModel and UnloadModel to callers beyond loopback
// and keeps serving them inference; a local caller loads and unloads;
// --allow-remote-model-control opens it.

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "gtest/gtest.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

// An IPv4 address of this host other than loopback; empty when it has none.
std::string NonLoopbackAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    if (std::string(text).rfind("127.", 0) != 0) found = text;
  }
  freeifaddrs(list);
  return found;
}

client::RnnServeClient ClientAt(const std::string& host, int port) {
  client::ClientOptions o;
  o.server = absl::StrCat(host, ":", port);
  o.timeout_ms = 10000;
  return client::RnnServeClient(o);
}

TEST(ModelControlTest, WithoutAdminTokensOnlyLocalCallersLoadAndUnload) {
  const std::string remote = NonLoopbackAddress();
  if (remote.empty()) GTEST_SKIP() << "this host has no non-loopback IPv4 address to call from";
  auto server = ServerProcess::Start(SourcePath("models/examples"), {"--address", "0.0.0.0"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto from_afar = ClientAt(remote, (*server)->port());
  const absl::Status refused = from_afar.Unload("waveform_lstm");
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
  EXPECT_NE(refused.message().find("--admin-token-file"), std::string::npos) << refused;
  EXPECT_EQ(from_afar.Load("waveform_lstm").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(from_afar.Metadata("waveform_lstm").ok()) << "inference stays open";

  auto local = ClientAt("127.0.0.1", (*server)->port());
  ASSERT_TRUE(local.Unload("waveform_lstm").ok());
  EXPECT_EQ(local.Metadata("waveform_lstm").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(local.Load("waveform_lstm").ok());
}

TEST(ModelControlTest, AllowRemoteModelControlOpensIt) {
  const std::string remote = NonLoopbackAddress();
  if (remote.empty()) GTEST_SKIP() << "this host has no non-loopback IPv4 address to call from";
  auto server = ServerProcess::Start(SourcePath("models/examples"),
                                     {"--address", "0.0.0.0", "--allow-remote-model-control"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto from_afar = ClientAt(remote, (*server)->port());
  EXPECT_TRUE(from_afar.Unload("waveform_lstm").ok());
  EXPECT_TRUE(from_afar.Load("waveform_lstm").ok());
}

}  // namespace
}  // namespace rnnserve::testing
