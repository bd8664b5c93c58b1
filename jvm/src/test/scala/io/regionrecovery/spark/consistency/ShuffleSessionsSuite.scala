package io.regionrecovery.spark.consistency

import org.scalatest.funsuite.AnyFunSuite

class ShuffleSessionsSuite extends AnyFunSuite {
  private val a = "8d7f6c1e-2b3a-4c5d-9e0f-112233445566"
  private val b = "0a0b0c0d-1111-4222-8333-444455556666"
  private def op(session: String, user: String = "alice_smith") =
    s"SparkConnect_OperationTag_User_${user}_Session_${session}_Operation_0f1e2d3c-0000-4000-8000-000000000001"

  test("a shuffle belongs to the Connect sessions whose operations ran its jobs, from their job tags") {
    val s = new ShuffleSessions
    s.jobStarted(s"${op(a)},SparkConnect_SessionTag_User_alice_Session_${a}_Tag_mine", Seq(1, 2))
    s.jobStarted(op(b, user = "bob"), Seq(2))
    s.jobStarted("some-user-tag", Seq(3)) // not a Connect operation
    s.jobStarted(null, Seq(4))
    assert(s.ranBy(1, a) && !s.ranBy(1, b))
    assert(s.ranBy(2, a) && s.ranBy(2, b), "a shuffle two sessions read belongs to both")
    assert(!s.ranBy(3, a) && !s.ranBy(4, a) && !s.ranBy(5, a))
  }

  test("session ids are read from operation tags only, whatever the user name holds") {
    assert(ShuffleSessions.sessionsIn(s"x,${op(a, user = "a_b_Session_c")}, y") == Set(a))
    assert(ShuffleSessions.sessionsIn(s"SparkConnect_SessionTag_User_u_Session_${a}_Tag_t").isEmpty)
  }
}
