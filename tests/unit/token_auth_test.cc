// Bearer tokens (server/auth/token_auth.h): which calls each kind of token may make.

#include "server/auth/token_auth.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace rnnserve::server::auth {
namespace {

grpc::StatusCode Code(const TokenAuthorizer& a, std::string_view header, Access access) {
  return a.Check(header, access).error_code();
}

TEST(TokenAuthTest, WithoutTokensEveryCallIsOpen) {
  const TokenAuthorizer open({}, {});
  EXPECT_FALSE(open.enabled());
  EXPECT_EQ(Code(open, "", Access::kInference), grpc::OK);
  EXPECT_EQ(Code(open, "", Access::kAdmin), grpc::OK);
}

TEST(TokenAuthTest, InferenceTokensGuardEveryCallAndAdminCallsTooWithoutAnAdminFile) {
  const TokenAuthorizer a({"tok-a", "tok-b"}, {});
  EXPECT_EQ(Code(a, "Bearer tok-b", Access::kInference), grpc::OK);
  EXPECT_EQ(Code(a, "bearer tok-a", Access::kAdmin), grpc::OK);
  EXPECT_EQ(Code(a, "", Access::kInference), grpc::UNAUTHENTICATED);
  EXPECT_EQ(Code(a, "tok-a", Access::kInference), grpc::UNAUTHENTICATED);  // no scheme
  EXPECT_EQ(Code(a, "Bearer tok", Access::kInference), grpc::UNAUTHENTICATED);
  EXPECT_EQ(Code(a, "Bearer tok-ab", Access::kInference), grpc::UNAUTHENTICATED);
  EXPECT_EQ(Code(a, "Basic dG9rLWE=", Access::kInference), grpc::UNAUTHENTICATED);
}

TEST(TokenAuthTest, AdminCallsNeedAnAdminTokenAndInferenceTokensArePermissionDenied) {
  const TokenAuthorizer a({"infer"}, {"admin"});
  EXPECT_EQ(Code(a, "Bearer admin", Access::kAdmin), grpc::OK);
  EXPECT_EQ(Code(a, "Bearer admin", Access::kInference), grpc::OK);
  EXPECT_EQ(Code(a, "Bearer infer", Access::kInference), grpc::OK);
  EXPECT_EQ(Code(a, "Bearer infer", Access::kAdmin), grpc::PERMISSION_DENIED);
  EXPECT_EQ(Code(a, "Bearer other", Access::kAdmin), grpc::UNAUTHENTICATED);
  EXPECT_EQ(Code(a, "", Access::kAdmin), grpc::UNAUTHENTICATED);
}

TEST(TokenAuthTest, AnAdminFileAloneLeavesInferenceOpen) {
  const TokenAuthorizer a({}, {"admin"});
  EXPECT_EQ(Code(a, "", Access::kInference), grpc::OK);
  EXPECT_EQ(Code(a, "", Access::kAdmin), grpc::UNAUTHENTICATED);
  EXPECT_EQ(Code(a, "Bearer admin", Access::kAdmin), grpc::OK);
}

TEST(TokenAuthTest, RefusalsSayTheSameWhateverWasWrongAndNeverQuoteTheToken) {
  const TokenAuthorizer a({"secret-token"}, {});
  const grpc::Status none = a.Check("", Access::kInference);
  const grpc::Status wrong = a.Check("Bearer secret-tokex", Access::kInference);
  EXPECT_EQ(none.error_message(), wrong.error_message());
  EXPECT_EQ(wrong.error_message().find("secret"), std::string::npos);
}

TEST(TokenAuthTest, OnlyTheWholeTokenMatchesNotAPrefixAnExtensionOrACaseVariant) {
  const TokenAuthorizer a({"abc", "abcdef"}, {});
  EXPECT_EQ(Code(a, "Bearer abc", Access::kInference), grpc::OK);
  EXPECT_EQ(Code(a, "Bearer abcdef", Access::kInference), grpc::OK);
  EXPECT_EQ(Code(a, "Bearer ab", Access::kInference), grpc::UNAUTHENTICATED);
  EXPECT_EQ(Code(a, "Bearer abcd", Access::kInference), grpc::UNAUTHENTICATED);
  EXPECT_EQ(Code(a, "Bearer abcabc", Access::kInference), grpc::UNAUTHENTICATED);
  EXPECT_EQ(Code(a, "Bearer ABC", Access::kInference), grpc::UNAUTHENTICATED);
  EXPECT_EQ(Code(a, std::string("Bearer abc\0", 11), Access::kInference), grpc::UNAUTHENTICATED);
  EXPECT_EQ(Code(a, "Bearer ", Access::kInference), grpc::UNAUTHENTICATED);
}

TEST(TokenAuthTest, TokenFileTakesOneTokenALineAndRefusesAnEmptyOrMissingFile) {
  const auto dir = std::filesystem::path(::testing::TempDir());
  const auto good = dir / "token_auth_good.txt";
  std::ofstream(good) << "\n  one \r\ntwo\n\n";
  auto tokens = ReadTokenFile(good.string());
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(*tokens, (std::vector<std::string>{"one", "two"}));
  const auto empty = dir / "token_auth_empty.txt";
  std::ofstream(empty) << "\n \n";
  EXPECT_EQ(ReadTokenFile(empty.string()).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadTokenFile((dir / "token_auth_missing.txt").string()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TokenAuthorizer::Create({.inference_token_file = empty.string()}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A short token is accepted with a startup warning naming its file's flag, its place and its
// length, never the token.
TEST(TokenAuthTest, ShortTokensGiveAWarningThatNeverQuotesThem) {
  const auto dir = std::filesystem::path(::testing::TempDir());
  const auto inference = dir / "token_auth_short.txt";
  std::ofstream(inference) << "0123456789abcdef0123\nQ\n";
  const auto admin = dir / "token_auth_admin_long.txt";
  std::ofstream(admin) << "0123456789abcdef\n";
  auto a = TokenAuthorizer::Create(
      {.inference_token_file = inference.string(), .admin_token_file = admin.string()});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ((*a)->warnings().size(), 1u);
  const std::string& w = (*a)->warnings()[0];
  EXPECT_NE(w.find("--auth-token-file: token 2 of the file has 1 characters"), std::string::npos)
      << w;
  EXPECT_EQ(w.find('Q'), std::string::npos) << w;
  EXPECT_EQ(Code(**a, "Bearer Q", Access::kInference), grpc::StatusCode::OK);
}

}  // namespace
}  // namespace rnnserve::server::auth
