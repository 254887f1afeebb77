// The share arithmetic of server/limits/fair_share.h: the floor, a caller's fair share, the
// newcomers' reserve, and the ledger that applies them to callers taking and giving back.

#include "server/limits/fair_share.h"

#include "gtest/gtest.h"

namespace rnnserve::server::limits {
namespace {

TEST(FairShareTest, FloorIsAPercentOfTheBoundAtLeastOneAtMostAll) {
  EXPECT_EQ(ShareFloor(1000, 6), 60);
  EXPECT_EQ(ShareFloor(8, 6), 1);  // 0.48 rounds down, then up to the one-unit minimum
  EXPECT_EQ(ShareFloor(8, 0), 1);
  EXPECT_EQ(ShareFloor(8, 100), 8);
  EXPECT_EQ(ShareFloor(int64_t{1} << 30, 6), 64424509);  // 6% of 1 GiB, without overflow
  EXPECT_EQ(ShareFloor(int64_t{1} << 62, 50), int64_t{1} << 61);
}

TEST(FairShareTest, ShareIsTheBoundOverActiveCallersNeverBelowTheFloor) {
  EXPECT_EQ(FairShareOf(8, 1, 1), 8);
  EXPECT_EQ(FairShareOf(8, 1, 2), 4);
  EXPECT_EQ(FairShareOf(8, 1, 3), 2);
  EXPECT_EQ(FairShareOf(8, 1, 16), 1);
  EXPECT_EQ(FairShareOf(1000, 60, 40), 60);
  EXPECT_EQ(FairShareOf(1000, 60, 0), 1000);  // no one active counts as one
}

TEST(FairShareTest, LoneCallerKeepsTheLastFloorFreeForNewcomers) {
  // 8 slots, floor 1: a lone caller holding 6 may take a 7th but not the 8th.
  ShareAsk ask{.capacity = 8, .floor = 1, .total = 6, .held = 6, .active = 1, .amount = 1};
  EXPECT_EQ(CheckShare(ask), ShareVerdict::kGranted);
  ask.total = ask.held = 7;
  EXPECT_EQ(CheckShare(ask), ShareVerdict::kReserved);
  // A newcomer (holding nothing) takes it.
  EXPECT_EQ(
      CheckShare({.capacity = 8, .floor = 1, .total = 7, .held = 0, .active = 2, .amount = 1}),
      ShareVerdict::kGranted);
  // Then the bound is full for everyone.
  EXPECT_EQ(
      CheckShare({.capacity = 8, .floor = 1, .total = 8, .held = 0, .active = 3, .amount = 1}),
      ShareVerdict::kBoundFull);
}

TEST(FairShareTest, CallerOverItsShareIsRefusedWhileOthersHoldSome) {
  // 1000 bytes, floor 60, two callers active: 500 each.
  EXPECT_EQ(
      CheckShare(
          {.capacity = 1000, .floor = 60, .total = 560, .held = 500, .active = 2, .amount = 1}),
      ShareVerdict::kOverShare);
  EXPECT_EQ(
      CheckShare(
          {.capacity = 1000, .floor = 60, .total = 560, .held = 60, .active = 2, .amount = 380}),
      ShareVerdict::kGranted);
  // Up to its share, but not into the reserve.
  EXPECT_EQ(
      CheckShare(
          {.capacity = 1000, .floor = 60, .total = 560, .held = 60, .active = 2, .amount = 440}),
      ShareVerdict::kReserved);
  // Within its floor a caller is never over its share, however many are active.
  EXPECT_EQ(
      CheckShare(
          {.capacity = 1000, .floor = 60, .total = 900, .held = 10, .active = 50, .amount = 50}),
      ShareVerdict::kGranted);
  const ShareAsk over{
      .capacity = 1000, .floor = 60, .total = 560, .held = 500, .active = 2, .amount = 1};
  EXPECT_EQ(ExplainShare(over, ShareVerdict::kOverShare),
            "this caller holds 500 and its fair share is 500 (1000 shared by 2 active callers, "
            "at least the floor of 60, --fair-floor-percent)");
}

TEST(FairShareTest, FloorOfTheWholeBoundIsFirstComeFirstServed) {
  for (int64_t held : {0, 3, 7}) {
    EXPECT_EQ(CheckShare({.capacity = 8,
                          .floor = 8,
                          .total = held + 0,
                          .held = held,
                          .active = 5,
                          .amount = 8 - held}),
              ShareVerdict::kGranted)
        << held;
  }
}

TEST(ShareLedgerTest, FloodingCallerNeverLocksOutAPoliteOne) {
  // A flooding caller asks for a slot 16 times per round and gives one back per round; a
  // polite caller asks for one and gives it back. Every polite ask is granted.
  ShareLedger ledger;
  constexpr int64_t kCapacity = 8, kFloor = 1;
  int polite_granted = 0;
  for (int round = 0; round < 100; ++round) {
    for (int i = 0; i < 16; ++i) {
      ledger.Take("heavy", 1, kCapacity, kFloor);
    }
    const bool granted = ledger.Take("polite", 1, kCapacity, kFloor) == ShareVerdict::kGranted;
    polite_granted += granted;
    if (granted) ledger.Give("polite", 1);
    ledger.Give("heavy", 1);
  }
  EXPECT_EQ(polite_granted, 100);
  EXPECT_GE(ledger.held("heavy"), 4);  // the flood still uses what the polite caller leaves
}

TEST(ShareLedgerTest, SharesShrinkAsCallersArriveAndGrowAsTheyLeave) {
  ShareLedger ledger;
  for (int i = 0; i < 8; ++i) ledger.Take("a", 1, 8, 1);
  EXPECT_EQ(ledger.held("a"), 7);  // the 8th is the reserve
  EXPECT_EQ(ledger.Take("b", 1, 8, 1), ShareVerdict::kGranted);
  EXPECT_EQ(ledger.Take("b", 1, 8, 1), ShareVerdict::kBoundFull);
  ledger.Give("a", 4);  // a at 3, b at 1: a may go back to its share of 4 only
  EXPECT_EQ(ledger.Take("a", 1, 8, 1), ShareVerdict::kGranted);
  EXPECT_EQ(ledger.Take("a", 1, 8, 1), ShareVerdict::kOverShare);
  EXPECT_EQ(ledger.Take("b", 1, 8, 1), ShareVerdict::kGranted);
  ledger.Give("b", 2);
  EXPECT_EQ(ledger.callers(), 1);
  EXPECT_EQ(ledger.Take("a", 1, 8, 1), ShareVerdict::kGranted);  // alone again: 5 of 7
  EXPECT_EQ(ledger.total(), 5);
  ledger.Give("a", 100);  // never below zero
  EXPECT_EQ(ledger.total(), 0);
  EXPECT_EQ(ledger.callers(), 0);
}

}  // namespace
}  // namespace rnnserve::server::limits
