"""Bounded, authenticated groups from Python: unused ids stop their roots, timeouts accept inf and tiny values,
from_address needs a secret off loopback and derives its token from it, a fork child cannot act
as its parent's rank."""
import gc
import os
import time

import numpy as np
import pytest

import actorcc
from conftest import free_port


def _fds():
    return len(os.listdir("/proc/self/fd"))


def _threads():
    return len(os.listdir("/proc/self/task"))


def test_dropped_unused_ids_stop_their_roots():
    gc.collect()
    fds, threads = _fds(), _threads()
    ids = [actorcc.UniqueId.create("127.0.0.1") for _ in range(50)]
    assert _fds() - fds >= 50 and _threads() - threads >= 50  # each root: a thread and fds
    del ids
    gc.collect()
    assert _fds() - fds <= 0
    assert _threads() - threads <= 0


def test_an_id_that_left_the_process_keeps_its_root():
    uid = actorcc.UniqueId.create("127.0.0.1")
    text = str(uid)  # could now be on its way to another process
    del uid
    gc.collect()
    # The root still answers: a rank joining with the printed id forms the group.
    with actorcc.Communicator(text, 0, 1, backend="cpu", join_timeout=10) as c:
        x = np.arange(4, dtype=np.float32)
        c.all_reduce(x)
        assert list(x) == [0, 1, 2, 3]


def test_an_id_used_in_this_process_is_not_stopped_by_dropping_it():
    uid = actorcc.UniqueId.create("127.0.0.1")
    c = actorcc.Communicator(uid, 0, 1, backend="cpu", join_timeout=10)
    del uid
    gc.collect()
    c.host_barrier()
    c.close()


@pytest.mark.parametrize("timeout", [float("inf"), 1e-4, 1e300])
def test_infinite_and_tiny_timeouts(uid, timeout):
    # inf: no limit (was undefined behaviour, failing at once with a negative ms count);
    # 1e-4 rounds up to 1 ms instead of down to 0.
    with actorcc.Communicator(uid, 0, 1, backend="cpu", timeout=timeout, join_timeout=float("inf")) as c:
        x = np.ones(7, np.int32)
        c.all_reduce(x)
        assert list(x) == [1] * 7
        assert c.allgather_bytes(b"x") == [b"x"]


def test_zero_or_nan_timeout_is_refused(uid):
    for bad in (0, -1, float("nan")):
        with pytest.raises(actorcc.InvalidArgumentError, match="timeout"):
            actorcc.Communicator(uid, 0, 1, backend="cpu", timeout=bad)


def test_oversized_allgather_bytes_fails_on_the_caller_and_the_group_stays_usable(uid):
    with actorcc.Communicator(uid, 0, 1, backend="cpu", join_timeout=10) as c:
        with pytest.raises(actorcc.InvalidArgumentError, match="above the limit"):
            c.allgather_bytes(b"x" * (64 << 20))
        assert c.allgather_bytes(b"fine") == [b"fine"]


def test_from_address_off_loopback_needs_a_secret(monkeypatch):
    monkeypatch.delenv("ACTORCC_BOOTSTRAP_SECRET", raising=False)
    with pytest.raises(actorcc.InvalidArgumentError, match="ACTORCC_BOOTSTRAP_SECRET"):
        actorcc.Communicator.from_address("10.11.12.13", 29500, 1, 2, join_timeout=1)


def test_from_address_with_a_secret_forms_the_group(monkeypatch):
    monkeypatch.setenv("ACTORCC_BOOTSTRAP_SECRET", os.urandom(16).hex())
    port = free_port()
    with actorcc.Communicator.from_address("127.0.0.1", port, 0, 1, backend="cpu", join_timeout=10) as c:
        assert c.allgather_bytes(b"s") == [b"s"]


@pytest.mark.parametrize("mode", ["call", "exit"])
def test_fork_child_cannot_act_as_the_rank_and_its_exit_leaves_the_group_intact(uid, mode):
    # Rank 0 forks after joining. "call": the child calls all_reduce while rank
    # 1 waits in its own (before: the child's call paired with rank 1's, which returned 2101
    # where 3002 is right, silently). "exit": the child only exits (before: its goodbye told
    # rank 1 that rank 0 closed, and the parent lost its root connection). Now the child's call
    # raises naming the fork, and its teardown leaves the parent's sockets and segment alone.
    from mp_helpers import run_ranks
    import reliability_workers

    t0 = time.monotonic()
    res = run_ranks(2, reliability_workers.fork_after_join, uid, mode, timeout=60)
    assert time.monotonic() - t0 < 45
    for r in range(2):
        out = res[r][1]
        assert out["exact"], f"rank {r}: {out['first']} (3002 is right)"
        assert out["second"], f"rank {r}"
        assert out["after_fork_s"] < 10, out
    child = res[0][1]["child"]
    if mode == "call":
        kind, culprit, text = child.split("|", 2)
        assert kind == "UnsupportedError" and culprit == "0", child
        assert "fork() child" in text and "created by process" in text, child
    else:
        assert child == "no call"


def test_setup_failure_is_a_system_error_naming_the_rank(uid):
    # A full (or read-only) /dev/shm on the segment's creator was raised as
    # UnsupportedError with culprit -1 on every rank. Now every rank raises SystemCallError (an
    # OSError) naming the creator, rank 0, as the culprit.
    from mp_helpers import run_ranks
    import reliability_workers

    res = run_ranks(2, reliability_workers.setup_failure, uid, timeout=60)
    for r in range(2):
        assert res[r][1] is not None, f"rank {r} formed a group with a 4 TiB workspace"
        kind, culprit, text, secs = res[r][1]
        assert kind == "SystemCallError" and culprit == 0, (r, kind, culprit, text)
        assert "rank 0" in text and ("No space left" in text or "space" in text.lower()), text
        assert secs < 15, secs


def test_a_used_unique_id_fails_fast_naming_the_cause(uid):
    # Joining with the id of a group that has ended retried "connection
    # refused" for the whole join timeout (600 s by default), then named nobody.
    with actorcc.Communicator(uid, 0, 1, backend="cpu", join_timeout=10) as c:
        c.host_barrier()
    time.sleep(0.3)  # the root ends once every rank has left
    t0 = time.monotonic()
    with pytest.raises(actorcc.RemoteError) as e:
        actorcc.Communicator(uid, 0, 1, backend="cpu", join_timeout=60)
    took = time.monotonic() - t0
    assert took < 6, took
    assert "a UniqueId serves one group" in str(e.value), str(e.value)
    assert e.value.culprit == -1 and e.value.observer_rank == 0


def test_errors_the_python_layer_raises_have_every_attribute():
    # help(actorcc) says every error has .culprit; one raised by the Python
    # layer itself (no C++ error behind it) had none.
    for cls in (actorcc.Error, actorcc.InvalidArgumentError, actorcc.TimeoutError, actorcc.RemoteError,
                actorcc.UnsupportedError):
        e = cls("raised in Python")
        assert (e.culprit, e.rank, e.observer_rank) == (-1, -1, -1), cls
        assert tuple(e.culprits) == (), cls
        assert isinstance(e.code, str) and e.code, cls
    assert actorcc.InvalidArgumentError("x").code == "invalid argument"


def test_a_rank_waiting_to_join_says_which_ranks_are_missing(uid, capfd):
    # A rank that never joins meant 600 s with no output at all. Now the root
    # and the ranks already in say which ranks are missing, 5 s after the first arrived and
    # then every 10 s; the timeout names them too.
    t0 = time.monotonic()
    with pytest.raises(actorcc.TimeoutError) as e:
        actorcc.Communicator(uid, 0, 3, backend="cpu", join_timeout=6)
    assert time.monotonic() - t0 < 12
    assert e.value.culprit == 1 and "ranks 1, 2 of 3 did not join" in str(e.value), str(e.value)
    err = capfd.readouterr().err
    assert "still waiting for ranks 1, 2 of 3 to join (1 joined;" in err, err
    assert "actorcc rank 0: the group at" in err, err


def test_torch_groups_default_to_nccls_timeout_and_name_missing_ranks_and_world_sizes():
    # Through torch the default was 30 minutes (torch's generic default, where
    # its NCCL backend gets 10), and a group whose ranks did not all arrive named none of them.
    torch = pytest.importorskip("torch")
    import datetime

    import torch.distributed as dist
    from actorcc import torch as at

    assert at._timeout_of(dist.constants.default_pg_timeout) == 600.0
    assert at._timeout_of(datetime.timedelta(seconds=7)) == 7.0
    store = dist.HashStore()
    t0 = time.monotonic()
    with pytest.raises(actorcc.TimeoutError) as e:
        at._create(store, 0, 3, datetime.timedelta(seconds=1))
    assert time.monotonic() - t0 < 5
    assert "rank(s) 1, 2 of 3 have not created the group" in str(e.value) and e.value.culprit == 1, str(e.value)
    store = dist.HashStore()
    store.set("actorcc_created/1", "4")  # rank 1 was given another world size
    with pytest.raises(actorcc.InvalidArgumentError) as e:
        at._create(store, 0, 3, datetime.timedelta(seconds=1))
    assert "disagree on the world size" in str(e.value) and "rank 1 has 4" in str(e.value), str(e.value)
    assert e.value.culprit == 1
    del torch


def _foreign_listener(port, mode):
    """Another program on the port: accepts, then stays silent or answers with its own bytes."""
    import socket
    import threading

    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(16)
    held = []

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            held.append(conn)
            if mode == "garbage":
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    return srv, held


@pytest.mark.parametrize("mode", ["silent", "garbage"])
def test_from_address_names_another_program_holding_the_port(monkeypatch, mode):
    # With another program on the port, ranks 1.. printed nothing for 20+ s and
    # then blamed the actorcc root's join deadline. Now a listener that does not greet like an
    # actorcc root is named within seconds (silence: 5 s; foreign bytes: at once), and rank 0's
    # "port in use" says what holds it.
    monkeypatch.delenv("ACTORCC_BOOTSTRAP_SECRET", raising=False)
    port = free_port()
    srv, held = _foreign_listener(port, mode)
    try:
        t0 = time.monotonic()
        with pytest.raises(actorcc.Error) as e:
            actorcc.Communicator.from_address("127.0.0.1", port, 1, 2, backend="cpu", join_timeout=60)
        took = time.monotonic() - t0
        text = str(e.value)
        assert f"127.0.0.1:{port}" in text and "is not an actorcc root (another program holds the port?)" in text, text
        assert ("sent nothing for 5 s" if mode == "silent" else "bytes that are not actorcc's protocol") in text, text
        assert e.value.culprit == -1 and e.value.observer_rank == 1, (e.value.culprit, e.value.observer_rank)
        assert took < (9 if mode == "silent" else 3), took
        with pytest.raises(actorcc.SystemCallError) as e0:
            actorcc.Communicator.from_address("127.0.0.1", port, 0, 2, backend="cpu", join_timeout=60)
        text = str(e0.value)
        assert "the port is already in use" in text and "is not an actorcc root" in text, text
    finally:
        srv.close()
        for c in held:
            c.close()


def _two_launches(tmp_path, order, run_ids):
    """Two 2-rank launches A and B on one from_address address, their four ranks started in
    `order` ("A0", "B1", ...) 150 ms apart; returns each rank's result by name."""
    import threading

    from mp_helpers import run_ranks
    import reliability_workers

    names = [f"{launch}{rank}" for launch, rank, _ in reliability_workers.LAUNCH_RANKS]
    env = (lambda i: {"ACTORCC_RUN_ID": f"job-{names[i][0]}"}) if run_ids else None
    port = free_port()
    res = {}
    t = threading.Thread(target=lambda: res.update(enumerate(run_ranks(
        4, reliability_workers.launch_rank, port, str(tmp_path), timeout=60, env=env, expect_errors=True))))
    t.start()
    t0 = time.monotonic()
    while len(list(tmp_path.glob("ready-*"))) < 4 and time.monotonic() - t0 < 60:
        time.sleep(0.01)
    for who in order:
        (tmp_path / f"go-{names.index(who)}").touch()
        time.sleep(0.15)
    time.sleep(1.5)  # past the root's claim window: the last rank's claim is in
    (tmp_path / "end").touch()
    t.join()
    return {names[i]: r for i, r in res.items()}


@pytest.mark.parametrize("order", [("A0", "B1", "B0", "A1"), ("B1", "A1", "A0", "B0")])
def test_two_launches_on_one_address_never_mix_their_data(tmp_path, monkeypatch, order):
    # Two jobs on one host with the same from_address(host, port, rank, 2) formed
    # a group of A's rank 0 and B's rank 1, both reporting success with each other's data.
    # Without a run id, the second root and the second claim of rank 1 show within the root's
    # claim window: every rank fails, naming the conflict; none returns data.
    for v in ("ACTORCC_RUN_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "ACTORCC_BOOTSTRAP_SECRET"):
        monkeypatch.delenv(v, raising=False)
    out = _two_launches(tmp_path, order, run_ids=False)
    for who, (kind, val) in out.items():
        assert kind == "err", f"{who} returned {val} (A's sum is 3, B's 30) without an error"
        if who == order[-1] and ("could not connect" in val["msg"] or "did not join within" in val["msg"]):
            # It came after the poisoned group's rank 0 had failed and exited, and the root with
            # it: a joiner finds no root, a rank 0 hosts one that its own rank 1 (failed) never
            # reaches. An error all the same, with no data.
            continue
        assert "two roots for" in val["msg"] or "rank 1 is claimed twice" in val["msg"], (who, val["msg"])


@pytest.mark.parametrize("order", [("A0", "B1", "B0", "A1"), ("B1", "A1", "A0", "B0")])
def test_with_run_ids_the_other_launch_is_refused_and_this_one_runs(tmp_path, monkeypatch, order):
    # With a run id (ACTORCC_RUN_ID here; TORCHELASTIC_RUN_ID or SLURM_JOB_ID where a launcher
    # sets one) B's ranks are refused before they are a claim, naming both runs, and A runs.
    for v in ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "ACTORCC_BOOTSTRAP_SECRET"):
        monkeypatch.delenv(v, raising=False)
    out = _two_launches(tmp_path, order, run_ids=True)
    assert out["A0"] == ("ok", 3) and out["A1"] == ("ok", 3), out
    for who in ("B0", "B1"):
        kind, val = out[who]
        assert kind == "err", (who, val)
        assert "belongs to run 'job-B' (from ACTORCC_RUN_ID)" in val["msg"], (who, val["msg"])
        assert "is run 'job-A' (from ACTORCC_RUN_ID)" in val["msg"], (who, val["msg"])
    assert "the port is already in use" in out["B0"][1]["msg"], out["B0"]
