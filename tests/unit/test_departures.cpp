// Departures: a rank that closed its communicator after N collective calls makes every later
// collective call fail at once, naming it, and a call already in flight past N is aborted; calls
// that do not need it (point-to-point between the others, collectives up to N) go on.
#include <gtest/gtest.h>

#include <string>

#include "actorcc/error.hpp"
#include "core/departures.hpp"

using namespace actorcc;

namespace {

CollArgs collective() { return CollArgs{Collective::AllReduce}; }

CollArgs send_to(int peer) {
  CollArgs a{Collective::Send};
  a.peer = peer;
  return a;
}

std::string refusal(Departures& d, const CollArgs& a) {
  try {
    d.enter(a);
  } catch (const RemoteError& e) {
    EXPECT_EQ(e.rank(), 0);
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Departures, CollectivesPastTheLeaversCountAreRefusedNamingIt) {
  Departures d;
  d.start(0, 3);
  AbortSignal abort(0);
  d.on_departure({2, 1}, abort);  // rank 2 left after 1 collective call
  EXPECT_FALSE(abort.raised());
  EXPECT_EQ(refusal(d, collective()), "");  // call 1: rank 2 took part in it
  const std::string msg = refusal(d, collective());
  EXPECT_NE(msg.find("rank 2 closed the communicator after 1 collective call(s); this rank's collective call 2 needs it"),
            std::string::npos)
      << msg;
  EXPECT_EQ(d.issued(), 2u);
  // Point-to-point calls between the others go on; one with the leaver is refused.
  EXPECT_EQ(refusal(d, send_to(1)), "");
  const std::string p2p = refusal(d, send_to(2));
  EXPECT_NE(p2p.find("rank 2 closed the communicator; a send with it cannot complete"), std::string::npos) << p2p;
  EXPECT_EQ(d.issued(), 2u);  // point-to-point calls are not counted
}

TEST(Departures, ACallInFlightPastTheLeaversCountIsAborted) {
  Departures d;
  d.start(1, 2);
  AbortSignal abort(1);
  d.enter(collective());
  d.enter(collective());
  d.on_departure({0, 1}, abort);  // rank 0 left after 1 call: this rank's call 2 waits for it
  ASSERT_TRUE(abort.raised());
  EXPECT_NE(abort.reason().find("rank 0 closed the communicator after 1 collective call(s); this rank's collective call 2 "
                                "needs it"),
            std::string::npos)
      << abort.reason();
}

TEST(Departures, ReportsOfRanksOutsideTheGroupAreIgnored) {
  Departures d;
  d.start(0, 2);
  AbortSignal abort(0);
  d.enter(collective());
  d.on_departure({5, 0}, abort);
  d.on_departure({-1, 0}, abort);
  EXPECT_FALSE(abort.raised());
  EXPECT_EQ(refusal(d, collective()), "");
}
