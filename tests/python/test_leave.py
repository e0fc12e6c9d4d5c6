"""A clean leave (close(), `with`, an exception that unwinds the communicator) is told to the
rest of the group at once by the root: a collective that needs the leaver fails within ~1 s,
naming it, whether it was already waiting or comes later; point-to-point calls between the
others still work."""
import actorcc
from leave_workers import leave_then_p2p, leave_while_others_wait
from mp_helpers import run_ranks, values


def test_a_pending_and_a_later_collective_fail_at_once_naming_the_leaver():
    uid = actorcc.UniqueId.create("127.0.0.1")
    res = values(run_ranks(3, leave_while_others_wait, str(uid), timeout=60))
    for rank, (pending, later) in enumerate(res[:2]):
        kind, took, msg, culprit = pending
        assert kind == "RemoteError", (rank, pending)
        assert "rank 2 closed the communicator" in msg, (rank, msg)
        assert culprit == 2, (rank, pending)
        assert took < 3.0, (rank, took)  # the call timeout is 30 s
        kind, took, msg, _ = later
        assert kind == "RemoteError" and "rank 2 closed the communicator" in msg, (rank, later)
        assert took < 0.5, (rank, later)


def test_after_a_leave_p2p_between_the_others_works_and_calls_needing_the_leaver_fail():
    uid = actorcc.UniqueId.create("127.0.0.1")
    res = values(run_ranks(3, leave_then_p2p, str(uid), timeout=60))
    assert res[1][0] is True  # rank 1 received rank 0's message intact
    kind, took, msg, culprit = res[0][1]
    assert kind == "RemoteError" and "rank 2 closed the communicator" in msg and culprit == 2, res[0][1]
    assert took < 0.5, res[0][1]
    for rank in (0, 1):
        kind, took, msg, culprit = res[rank][2]
        assert kind == "RemoteError", (rank, res[rank][2])
        assert "rank 2 closed the communicator after 1 collective call(s)" in msg, (rank, msg)
        assert culprit == 2 and took < 0.5, (rank, res[rank][2])
