"""Real Ray (CPU only): actors forming actorcc groups through create_group and through the
ray.util.collective backend; staggered starts; an actor killed mid-call."""
import os
import subprocess
import sys
import time

import pytest

ray = pytest.importorskip("ray")

import numpy as np  # noqa: E402

import actorcc  # noqa: E402
import actorcc.ray  # noqa: E402
import ray_actors  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def ray_session():
    # Workers inherit the environment: make the test helpers (ray_actors) importable there.
    old = os.environ.get("PYTHONPATH")
    paths = [HERE] + [p for p in sys.path if p.endswith(("python/pkg", "site-packages")) and os.path.isdir(p)]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths + ([old] if old else []))
    # Everything on loopback; no dashboard; 4 CPUs as CI has room for.
    # address="local": always a new instance of the tests' own (conftest: a private RAY_TMPDIR)
    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False, configure_logging=False)
    assert ray.util.get_node_ip_address() == "127.0.0.1"  # conftest keeps Ray on loopback
    import ray_actors
    yield ray.remote(num_cpus=0)(ray_actors.Worker)
    ray.shutdown()
    if old is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old


def _start(Worker, n, stagger=1.0):
    """n actors created `stagger` seconds apart, each also taking rank*0.5 s to start."""
    actors = []
    for r in range(n):
        actors.append(Worker.remote(delay=0.5 * r))
        if r < n - 1:
            time.sleep(stagger)
    return actors


def test_create_group_staggered(ray_session):
    actors = _start(ray_session, 4)
    infos = actorcc.ray.create_group(actors, name="g", timeout=30, join_timeout=60, backend="cpu")
    assert [i["rank"] for i in infos] == [0, 1, 2, 3]
    assert len({i["pid"] for i in infos}) == 4
    assert all(i["backend"] == "cpu" for i in infos)
    outs = ray.get([a.allreduce.remote("g", r + 1) for r, a in enumerate(actors)])
    assert all(len(o) == 16 and np.array_equal(o, 10.0 * ray_actors.pattern(16)) for o in outs)
    # a second group over the same actors, in the other order
    actorcc.ray.create_group(actors[::-1], name="g2", timeout=30, join_timeout=60, backend="cpu")
    outs = ray.get([a.allreduce.remote("g2", r, op="max") for r, a in enumerate(actors)])
    assert all(np.array_equal(o, 3.0 * ray_actors.pattern(16)) for o in outs)
    assert actorcc.ray.destroy_group(actors, "g") == [True] * 4
    actorcc.ray.destroy_group(actors, "g2")
    for a in actors:
        ray.kill(a)


@pytest.mark.parametrize("form", ["create_group", "create_collective_group"])
def test_forming_a_group_names_a_dead_actor_at_once(ray_session, form):
    # create_collective_group waited for the whole join timeout, then raised a raw
    # RayTaskError(TimeoutError); both must name the dead actor as soon as Ray reports it.
    actors = [ray_session.remote() for _ in range(3)]
    ray.get([a.pid.remote() for a in actors])
    ray.kill(actors[1])
    time.sleep(0.5)
    t0 = time.monotonic()
    with pytest.raises(actorcc.ray.GroupJoinError) as ei:
        getattr(actorcc.ray, form)(actors, f"dead_{form}", join_timeout=30, backend="cpu")
    assert time.monotonic() - t0 < 15  # not after join_timeout
    assert list(ei.value.missing) == [1], ei.value.missing
    assert "actor failed" in ei.value.missing[1] and "rank 1" in str(ei.value)
    assert f"{form}('dead_{form}')" in str(ei.value)
    for a in actors:
        ray.kill(a)


def test_actor_failing_its_join_is_named(ray_session):
    actors = [ray_session.remote() for _ in range(3)]
    actorcc.ray.create_group([actors[1]], name="dup", backend="cpu")  # actor 1 already has "dup"
    with pytest.raises(actorcc.ray.GroupJoinError) as ei:
        actorcc.ray.create_group(actors, name="dup", join_timeout=3, backend="cpu")
    assert list(ei.value.missing) == [1], ei.value.missing
    assert "already exists" in ei.value.missing[1]
    assert set(ei.value.reports) == {0, 1, 2}  # 0 and 2 timed out naming rank 1
    for a in actors:
        ray.kill(a)


def test_busy_actor_named_within_join_timeout(ray_session):
    actors = [ray_session.remote() for _ in range(2)]
    ray.get([a.pid.remote() for a in actors])
    actors[1].sleep.remote(12)  # busy: cannot run the join
    t0 = time.monotonic()
    with pytest.raises(actorcc.ray.GroupJoinError) as ei:
        actorcc.ray.create_group(actors, name="busy", join_timeout=3, grace=2, backend="cpu")
    assert time.monotonic() - t0 < 12
    assert list(ei.value.missing) == [1]
    for a in actors:
        ray.kill(a)


def test_ray_shutdown_with_live_groups_is_no_failure():
    # ray.shutdown() kills every actor at once; the driver's roots printed one "disconnected
    # without leaving (process died?)" warning per rank. A rank killed alone is still a warning.
    env = dict(os.environ, ACTORCC_LOG="info")
    p = subprocess.run([sys.executable, os.path.join(HERE, "ray_shutdown.py")], capture_output=True, text=True,
                       timeout=240, env=env)
    assert "done" in p.stdout, p.stdout + p.stderr
    lines = [x for x in p.stderr.splitlines() if "actorcc root" in x]
    warn = [x for x in lines if "WARN" in x]
    assert len(warn) == 1 and "rank 1 " in warn[0], lines
    assert "disconnected without leaving" in warn[0] or "was lost" in warn[0], lines
    # Group "b" lost ranks 0, 1, 2 and group "a" its survivors 0, 2, each at once: one line each.
    # A rank whose actor Ray let exit cleanly said goodbye (no loss), so a line may name fewer.
    together = sorted(x.split(": ")[1].split(" disconnected")[0] for x in lines if "disconnected together" in x)
    assert together and all(t in ("ranks 0, 1, 2", "ranks 0, 1", "ranks 0, 2", "ranks 1, 2") for t in together), lines


def test_killed_actor_mid_call(ray_session):
    actors = [ray_session.remote() for _ in range(4)]
    actorcc.ray.create_group(actors, name="k", timeout=20, join_timeout=60, backend="cpu")
    refs = [a.timed_allreduce.remote("k") for a in actors[:3]]
    sleeper = actors[3].sleep.remote(60)  # rank 3 never enters the call ...
    time.sleep(1.0)
    ray.kill(actors[3])  # ... and dies while the others wait in it
    t0 = time.monotonic()
    res = ray.get(refs, timeout=40)
    for kind, took, culprit, msg in res:
        assert kind in ("RemoteError", "TimeoutError"), (kind, msg)
        assert took < 20.0 + 2.0, (kind, took, msg)
        assert "3" in msg
    assert any(kind == "RemoteError" and culprit == 3 for kind, _, culprit, _ in res), res
    assert time.monotonic() - t0 < 25
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(sleeper)
    for a in actors[:3]:
        ray.kill(a)


def test_ray_collective_backend(ray_session):
    from ray.util.collective import backend_registry
    assert hasattr(backend_registry, "register_collective_backend")
    actors = _start(ray_session, 4, stagger=0.5)
    # 1) from the driver, actorcc does the rendezvous
    actorcc.ray.create_collective_group(actors, group_name="cg", timeout=30, join_timeout=60, backend="cpu")
    outs = ray.get([a.col_ops.remote("cg") for a in actors])
    _check_col(outs)
    # 2) Ray-native: each actor registers and calls init_collective_group (UniqueId published
    # by rank 0 through a named actor); started in reverse order
    ranks = ray.get([a.native_init.remote(4, r, "native") for r, a in reversed(list(enumerate(actors)))])
    assert sorted(ranks) == [0, 1, 2, 3]
    _check_col(ray.get([a.col_ops.remote("native") for a in actors]))
    # 3) declarative: ray.util.collective.create_collective_group from the driver; the
    # actors' groups form lazily on their first call
    import ray.util.collective as col
    actorcc.ray.register_backend()
    actorcc.ray.register_backend_on(actors, timeout=30, join_timeout=60, backend="cpu")
    col.create_collective_group(actors, 4, [0, 1, 2, 3], backend="ACTORCC", group_name="decl")
    _check_col(ray.get([a.col_ops.remote("decl") for a in actors]))
    for a in actors:
        ray.kill(a)


def test_forming_a_group_says_why_it_waits(ray_session, monkeypatch, capfd):
    # Ray starting the actors' processes can take tens of seconds on a busy machine; the driver
    # said nothing meanwhile, then said "Ray is still starting their worker processes" also of
    # actors that were running (busy with another call, or in their constructor). Now one line
    # per actor says which, from Ray's actor table, and one line how long it took.
    monkeypatch.setattr(actorcc.ray.groups, "NOTICE_AFTER_S", 1.0)
    busy = ray_session.remote()
    ray.get(busy.pid.remote())
    busy.sleep.remote(3)  # running, its join queued behind this call
    slow = ray_session.remote(delay=4)  # in its constructor when the notice comes
    actorcc.ray.create_collective_group([busy, slow], group_name="told", timeout=30, join_timeout=60, backend="cpu")
    err = capfd.readouterr().err
    assert err.count("actorcc.ray.create_collective_group('told'): waiting for ") == 1, err
    assert "Ray is still starting their worker processes" not in err, err
    assert "\n  rank 0 " in err and "running (pid " in err and "queued behind" in err, err
    assert "\n  rank 1 " in err and "is still in the actor's constructor" in err, err
    assert "2 of 2 actor(s) joined after " in err, err
    for a in (busy, slow):
        ray.kill(a)


def test_ray_collective_send_recv(ray_session):
    actors = [ray_session.remote() for _ in range(4)]
    actorcc.ray.create_collective_group(actors, group_name="p2p", timeout=30, join_timeout=60, backend="cpu")
    for ok, got, want in ray.get([a.col_p2p.remote("p2p") for a in actors]):
        assert ok, (got, want)
    for a in actors:
        ray.kill(a)


def _elastic_actors(ray_session, n, **kw):
    cls = ray.remote(num_cpus=0, max_restarts=1)(ray_actors.ElasticWorker)
    actors = [cls.remote(**kw) for _ in range(n)]
    pids = ray.get([a.state.remote() for a in actors], timeout=60)
    return actors, [p["pid"] for p in pids]


def _kill_inside_a_call(actors, victim, call):
    """The victim, restartable, is killed by Ray while the others wait for it inside `call`; returns
    the others' errors and the victim's state once Ray restarted it."""
    sleeper = actors[victim].state.remote()
    ray.get(sleeper, timeout=30)
    refs = [call(a) for i, a in enumerate(actors) if i != victim]
    time.sleep(0.5)
    ray.kill(actors[victim], no_restart=False)
    errors = ray.get(refs, timeout=30)
    deadline = time.monotonic() + 60
    while True:  # Ray refuses calls while the actor restarts
        try:
            return errors, ray.get(actors[victim].state.remote(), timeout=60)
        except ray.exceptions.ActorUnavailableError:
            assert time.monotonic() < deadline, "Ray did not restart the actor within 60 s"
            time.sleep(0.2)


def test_elastic_group_shrinks_and_the_restarted_actor_rejoins(ray_session):
    actors, pids = _elastic_actors(ray_session, 4, groups=("el",))
    assert not any(ray.get([a.state.remote() for a in actors], timeout=30)[i]["rejoining"][0] for i in range(4))
    actorcc.ray.create_group(actors, name="el", timeout=20, join_timeout=30, backend="cpu")
    # a healthy group shrinks only with an explicit list
    with pytest.raises(ray.exceptions.RayTaskError, match="healthy group"):
        ray.get(actors[0].shrink.remote("el"), timeout=30)
    errors, st = _kill_inside_a_call(actors, 2, lambda a: a.blocked_allreduce.remote("el"))
    for e in errors:  # every survivor's call named rank 2
        assert e is not None and e["culprit"] == 2 and "rank 2" in e["msg"], e
    assert st["restarted"] and st["rejoining"] == [True] and st["pid"] != pids[2], st
    survivors = [actors[i] for i in (0, 1, 3)]
    t0 = time.monotonic()
    shrunk = ray.get([a.shrink.remote("el") for a in survivors], timeout=30)  # exclude = the culprit
    assert shrunk == [(0, 3, [0, 1, 3]), (1, 3, [0, 1, 3]), (2, 3, [0, 1, 3])], shrunk
    assert all(ok for ok, _, _ in ray.get([a.exact_allreduce.remote("el") for a in survivors], timeout=30))
    shrink_s = time.monotonic() - t0
    # the restarted actor asked to rejoin in its constructor: the members grow, it takes rank 2 back
    t0 = time.monotonic()
    grown = ray.get([a.grow.remote("el") for a in actors], timeout=60)
    assert grown == [(r, 4, [0, 1, 2, 3]) for r in range(4)], grown
    res = ray.get([a.exact_allreduce.remote("el") for a in actors], timeout=30)
    assert res == [(True, r, 4) for r in range(4)], res
    grow_s = time.monotonic() - t0
    # nobody else restarted; a grow with nobody waiting changes nothing
    assert [s["pid"] for s in ray.get([actors[i].state.remote() for i in (0, 1, 3)], timeout=30)] == \
        [pids[i] for i in (0, 1, 3)]
    assert ray.get([a.grow.remote("el") for a in actors], timeout=30) == grown
    # a planned shrink of a healthy group: actor 0 leaves; the others renumber
    planned = ray.get([a.shrink.remote("el", [0]) for a in actors[1:]], timeout=30)
    assert planned == [(0, 3, [1, 2, 3]), (1, 3, [1, 2, 3]), (2, 3, [1, 2, 3])], planned
    assert all(ok for ok, _, _ in ray.get([a.exact_allreduce.remote("el") for a in actors[1:]], timeout=30))
    print(f"ELASTIC-RAY shrink+first exact call {shrink_s:.2f} s, grow+first exact call {grow_s:.2f} s")
    for a in actors:
        ray.kill(a)


def test_elastic_group_two_actors_killed_together_shrink_within_seconds(ray_session):
    # Two actors killed together; shrink_group() (exclude = what the error lists) must
    # not wait for the second one: the group's join timeout is 60 s, the bar 5 s.
    actors, _ = _elastic_actors(ray_session, 5, groups=("two",))
    actorcc.ray.create_group(actors, name="two", timeout=20, join_timeout=60, backend="cpu")
    ray.get([a.state.remote() for a in actors], timeout=30)
    refs = [actors[i].blocked_allreduce.remote("two") for i in (0, 1, 4)]
    time.sleep(0.5)
    t0 = time.monotonic()
    for i in (2, 3):
        ray.kill(actors[i])  # no restart
    errors = ray.get(refs, timeout=30)
    for e in errors:
        assert e is not None and e["culprit"] in (2, 3), e
    survivors = [actors[i] for i in (0, 1, 4)]
    shrunk = ray.get([a.shrink.remote("two") for a in survivors], timeout=30)
    assert shrunk == [(r, 3, [0, 1, 4]) for r in range(3)], shrunk
    assert all(ok for ok, _, _ in ray.get([a.exact_allreduce.remote("two") for a in survivors], timeout=30))
    took = time.monotonic() - t0
    assert took < 5.0, took
    for a in actors:
        ray.kill(a)


def test_elastic_collective_group(ray_session):
    actors, pids = _elastic_actors(ray_session, 3, collective=("elc",))
    actorcc.ray.create_collective_group(actors, group_name="elc", timeout=20, join_timeout=30, backend="cpu")
    errors, st = _kill_inside_a_call(actors, 0, lambda a: a.col_blocked_allreduce.remote("elc"))
    for e in errors:  # rank 0 hosted nothing special: the survivors name it and go on
        assert e is not None and e["culprit"] == 0, e
    assert st["restarted"] and st["rejoining"] == [True], st
    survivors = actors[1:]
    assert ray.get([a.col_shrink_then_grow.remote("elc") for a in survivors], timeout=30) == [(0, 2), (1, 2)]
    outs = ray.get([a.col_exact_allreduce.remote("elc", v) for v, a in ((2, actors[1]), (3, actors[2]))], timeout=30)
    assert all(np.array_equal(o, 5 * ray_actors.pattern(4099)) for o in outs)
    # the restarted actor (rank 0 again) and the survivors grow; ray.util.collective's ranks follow
    got = ray.get([a.col_shrink_then_grow.remote("elc", grow=True) for a in actors], timeout=60)
    assert got == [(0, 3), (1, 3), (2, 3)], got
    outs = ray.get([a.col_exact_allreduce.remote("elc", r + 1) for r, a in enumerate(actors)], timeout=30)
    assert all(np.array_equal(o, 6 * ray_actors.pattern(4099)) for o in outs)
    for a in actors:
        ray.kill(a)


def _check_col(outs):
    world = len(outs)
    for r, o in enumerate(outs):
        assert o["rank"] == r and o["world"] == world
        pat = ray_actors.pattern
        assert o["allreduce"] == (world * (world + 1) / 2 * pat(4)).tolist()
        assert o["allreduce_max"] == world - 1
        assert o["broadcast"] == (world * pat(3)).tolist()
        assert o["allgather"] == [((i + 1) * pat(2)).tolist() for i in range(world)]
        assert o["reducescatter"] == (sum(r + k + 1 for k in range(world)) * pat(2, 2 * r)).tolist()
        assert o["reduce"] == ((world * (world + 1) / 2 if r == 0 else r + 1) * pat(2)).tolist()
