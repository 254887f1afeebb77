// Client input in error messages (server/client_text.h): short, printable, and model names
// checked before any lookup.

#include "server/client_text.h"

#include <string>

#include "gtest/gtest.h"

namespace rnnserve::server {
namespace {

TEST(ClientTextTest, LongTextIsCutWithItsLength) {
  const std::string quoted = QuoteClientText(std::string(10240, 'm'));
  EXPECT_EQ(quoted, std::string(128, 'm') + "... (10240 bytes)");
  EXPECT_EQ(QuoteClientText("short"), "short");
}

TEST(ClientTextTest, ControlBytesAreEscaped) {
  // A hex digit after an escape is escaped too, so the text reads back unambiguously.
  EXPECT_EQ(QuoteClientText(std::string("a\0b\n", 4)), "a\\x00\\x62\\n");
}

TEST(ClientTextTest, ModelNamesOfTheDocumentedSetPass) {
  for (const char* name : {"waveform_lstm", "m", "model-2.v1", "A_b-C.9"}) {
    EXPECT_TRUE(ValidateModelName(name).ok()) << name;
  }
  EXPECT_TRUE(ValidateModelName(std::string(128, 'x')).ok());
}

TEST(ClientTextTest, OtherModelNamesAreInvalidArgumentQuotedCut) {
  for (const std::string& name :
       {std::string(), std::string("a\0b", 3), std::string("../outside"), std::string(".hidden"),
        std::string("a/b"), std::string("with space"), std::string(129, 'x')}) {
    const absl::Status s = ValidateModelName(name);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_LT(s.message().size(), 300u);
  }
  EXPECT_NE(ValidateModelName(std::string("a\0z", 3)).message().find("a\\x00z"), std::string::npos);
}

TEST(ClientTextTest, ErrorMessagesAreBoundedForTheClientsHeaderLimit) {
  EXPECT_EQ(BoundedErrorMessage("fine"), "fine");
  const std::string cut = BoundedErrorMessage(std::string(10000, 'e'));
  EXPECT_LT(cut.size(), 4200u);
  EXPECT_NE(cut.find("(message cut; 10000 bytes)"), std::string::npos);
}

}  // namespace
}  // namespace rnnserve::server
