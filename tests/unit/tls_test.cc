// TLS credentials from PEM files (server/auth/tls.h): which files are refused before the
// listener starts, and the flag each refusal names. The PEM files are made by the openssl
// command.

#include "server/auth/tls.h"

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
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
    // "a"'s key under a pass phrase.
    made_ = made_ && std::system(absl::StrCat("cd ", d,
                                              " && openssl pkey -in a.key -aes256 -passout "
                                              "pass:secret -out encrypted.key >/dev/null 2>&1")
                                     .c_str()) == 0;
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

// "a" is valid from now for 2 days: the warning comes before and after, not within.
TEST_F(TlsTest, ACertificateOutsideItsValidityGivesAStartupWarning) {
  const TlsOptions o = {.cert_file = Path("a.pem"), .key_file = Path("a.key")};
  EXPECT_TRUE(TlsWarnings(o, absl::Now()).empty());
  const std::vector<std::string> expired = TlsWarnings(o, absl::Now() + absl::Hours(72));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_NE(expired[0].find("--tls-cert: the certificate in " + Path("a.pem") + " has expired"),
            std::string::npos)
      << expired[0];
  const std::vector<std::string> early = TlsWarnings(
      {.cert_file = Path("a.pem"), .key_file = Path("a.key"), .client_ca_file = Path("b.pem")},
      absl::Now() - absl::Hours(24));
  ASSERT_EQ(early.size(), 2u);
  EXPECT_NE(early[1].find("--tls-client-ca"), std::string::npos) << early[1];
  EXPECT_NE(early[1].find("is not valid yet"), std::string::npos) << early[1];
  EXPECT_TRUE(TlsWarnings({}, absl::Now() + absl::Hours(72)).empty());
}

// An encrypted key fails with its own message, and nothing is asked on the terminal: the check
// runs in a child whose controlling terminal is a pseudo-terminal this test reads.
TEST_F(TlsTest, AnEncryptedKeyIsRefusedWithoutAskingForAPassPhrase) {
  int master = -1;
  const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const absl::Status s = Make({.cert_file = Path("a.pem"), .key_file = Path("encrypted.key")});
    const bool clear = s.code() == absl::StatusCode::kInvalidArgument &&
                       s.message().find("is encrypted") != std::string::npos &&
                       s.message().find("--tls-key") != std::string::npos;
    _exit(clear ? 0 : 1);
  }
  std::string terminal;
  bool prompted = false;
  for (int i = 0; i < 100; ++i) {  // 10 s at most
    pollfd p{master, POLLIN, 0};
    bool ended = false;
    if (poll(&p, 1, 100) == 1) {
      char buf[256];
      const ssize_t n = read(master, buf, sizeof(buf));
      ended = n <= 0;  // the child closed the terminal: it has ended
      if (n > 0) terminal.append(buf, static_cast<size_t>(n));
      if (!prompted && terminal.find("pass phrase") != std::string::npos) {
        prompted = true;
        [[maybe_unused]] const ssize_t w = write(master, "\n", 1);  // let it go on
      }
    }
    int status = 0;
    if (waitpid(pid, &status, ended ? 0 : WNOHANG) == pid) {
      close(master);
      EXPECT_FALSE(prompted) << "the terminal was asked: " << terminal;
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << "the refusal does not say the key is encrypted, naming --tls-key";
      return;
    }
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  close(master);
  FAIL() << "the check did not end within 10 s; the terminal shows: " << terminal;
}

}  // namespace
}  // namespace rnnserve::server::auth
