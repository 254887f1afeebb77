// TLS credentials from PEM files (server/auth/tls.h): which files are refused before the
// listener starts, and the flag each refusal names. The PEM files are made by the openssl
// command.

#include "server/auth/tls.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace rnnserve::server::auth {
namespace {

namespace fs = std::filesystem;

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::path(::testing::TempDir()) /
                        absl::StrCat("rnnserve_tls_test_", ::getpid()));
    fs::create_directories(*dir_);
    const std::string d = dir_->string();
    // Two self-signed certificates with their keys: "a" and "b".
    for (const char* n : {"a", "b"}) {
      const std::string cmd = absl::StrCat(
          "cd ", d, " && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 ",
          "-nodes -keyout ", n, ".key -out ", n, ".pem -days 2 -subj /CN=", n, " >/dev/null 2>&1");
      made_ = made_ && std::system(cmd.c_str()) == 0;
    }
    std::ofstream(*dir_ / "garbage.pem") << "not a certificate\n";
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
  }
  void SetUp() override {
    if (!made_) GTEST_SKIP() << "the openssl command could not make the test's certificates";
  }
  static std::string Path(const std::string& name) { return (*dir_ / name).string(); }

  static absl::Status Make(const TlsOptions& o) { return ServerCredentials(o).status(); }

  static fs::path* dir_;
  static bool made_;
};
fs::path* TlsTest::dir_ = nullptr;
bool TlsTest::made_ = true;

TEST_F(TlsTest, NoCertificateMeansPlaintextAndACertificateWithItsKeyMeansTls) {
  EXPECT_TRUE(Make({}).ok());
  EXPECT_TRUE(Make({.cert_file = Path("a.pem"), .key_file = Path("a.key")}).ok());
  EXPECT_TRUE(
      Make({.cert_file = Path("a.pem"), .key_file = Path("a.key"), .client_ca_file = Path("b.pem")})
          .ok());
}

TEST_F(TlsTest, HalfAPairOrAClientCaWithoutTlsIsRefused) {
  EXPECT_EQ(Make({.cert_file = Path("a.pem")}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Make({.key_file = Path("a.key")}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Make({.client_ca_file = Path("a.pem")}).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TlsTest, AFileThatHoldsNoPemIsRefusedNamingItsFlag) {
  const absl::Status cert = Make({.cert_file = Path("garbage.pem"), .key_file = Path("a.key")});
  EXPECT_EQ(cert.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cert.message().find("--tls-cert"), std::string::npos) << cert;
  const absl::Status key = Make({.cert_file = Path("a.pem"), .key_file = Path("garbage.pem")});
  EXPECT_NE(key.message().find("--tls-key"), std::string::npos) << key;
  const absl::Status ca = Make({.cert_file = Path("a.pem"),
                                .key_file = Path("a.key"),
                                .client_ca_file = Path("garbage.pem")});
  EXPECT_NE(ca.message().find("--tls-client-ca"), std::string::npos) << ca;
  const absl::Status missing = Make({.cert_file = Path("missing.pem"), .key_file = Path("a.key")});
  EXPECT_NE(missing.message().find("--tls-cert"), std::string::npos) << missing;
}

TEST_F(TlsTest, AKeyThatIsNotTheCertificatesIsRefused) {
  const absl::Status s = Make({.cert_file = Path("a.pem"), .key_file = Path("b.key")});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("is not the key of --tls-cert"), std::string::npos) << s;
}

}  // namespace
}  // namespace rnnserve::server::auth
