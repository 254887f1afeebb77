// FairQueue, the order of a model's waiting requests (server/batching/fair_queue.h): callers
// take turns a request each, a newcomer is served next, levels order a caller's own requests,
// and a request removed unserved gives no turn away.

#include "server/batching/fair_queue.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace rnnserve::testing {
namespace {

using Queue = server::batching::FairQueue<std::string>;
using Verdict = Queue::Verdict;

std::vector<std::string> Order(const Queue& q) {
  std::vector<std::string> order;
  q.ForEach([&](const std::string& item) {
    order.push_back(item);
    return true;
  });
  return order;
}

// Serves (removes as served) the head; returns it.
std::string Serve(Queue& q) {
  const std::string head = *q.Head();
  q.Remove(
      [&](const std::string& item) { return item == head ? Verdict::kServed : Verdict::kKeep; });
  return head;
}

TEST(FairQueueTest, CallersTakeTurnsOneRequestEach) {
  Queue q(1);
  for (const char* item : {"a1", "a2", "a3", "a4"}) q.Push("a", 1, item);
  q.Push("b", 1, "b1");
  q.Push("b", 1, "b2");
  EXPECT_EQ(Order(q), (std::vector<std::string>{"a1", "b1", "a2", "b2", "a3", "a4"}));
  EXPECT_EQ(q.size(), 6);
}

TEST(FairQueueTest, ACallerThatHadNothingQueuedIsServedNext) {
  Queue q(1);
  for (const char* item : {"a1", "a2", "a3", "a4"}) q.Push("a", 1, item);
  EXPECT_EQ(Serve(q), "a1");
  EXPECT_EQ(Serve(q), "a2");
  q.Push("b", 1, "b1");
  EXPECT_EQ(Order(q), (std::vector<std::string>{"b1", "a3", "a4"}));
  EXPECT_EQ(Serve(q), "b1");
  q.Push("b", 1, "b2");  // b is new again, but a's turn comes first: b had its turn
  EXPECT_EQ(Order(q), (std::vector<std::string>{"a3", "b2", "a4"}));
}

TEST(FairQueueTest, LevelsOrderACallersOwnRequestsOnly) {
  Queue q(2);
  q.Push("a", 2, "a1");
  q.Push("a", 2, "a2");
  q.Push("b", 2, "b1");
  q.Push("a", 1, "a3-high");
  EXPECT_EQ(Order(q), (std::vector<std::string>{"a3-high", "b1", "a1", "a2"}));
}

TEST(FairQueueTest, ARequestRemovedUnservedGivesNoTurnAway) {
  Queue q(1);
  q.Push("a", 1, "a1");
  q.Push("a", 1, "a2");
  q.Push("b", 1, "b1");
  q.Push("b", 1, "b2");
  const std::vector<std::string> dropped = q.Remove(
      [](const std::string& item) { return item == "a1" ? Verdict::kDropped : Verdict::kKeep; });
  EXPECT_EQ(dropped, (std::vector<std::string>{"a1"}));
  EXPECT_EQ(Order(q), (std::vector<std::string>{"a2", "b1", "b2"}));
  EXPECT_EQ(q.TakeAll(), (std::vector<std::string>{"a2", "b1", "b2"}));
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.Head(), nullptr);
}

}  // namespace
}  // namespace rnnserve::testing
