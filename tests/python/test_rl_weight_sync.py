"""actorcc.weight_sync with real Ray actors on CPU: bucketed, digest-checked broadcast from a
trainer to rollout actors that arrive seconds apart; weights bit for bit (bfloat16 and float32,
a model of 1 GiB); a rollout actor killed during a sync: the others finish that sync within
seconds, and Ray's restart of it rejoins and gets the current weights at the next sync."""
import os
import time

import pytest

ray = pytest.importorskip("ray")
torch = pytest.importorskip("torch")

import actorcc.weight_sync as ws  # noqa: E402

import rl_ray  # noqa: E402

pytestmark = pytest.mark.ray

SMALL = {"embed": ((300, 64), "bfloat16"), "w": ((64, 256), "float32"), "b": ((256,), "float32"),
         "scalar": ((), "bfloat16"), "empty": ((0, 4), "float32"), "steps": ((3,), "int64")}
# 1 GiB + 2 MiB: half bfloat16, half float32, in the framework's 128 MiB buckets
GIB = {**{f"layers.{i}.w": ((1 << 13, 1 << 13), "bfloat16") for i in range(4)},
       **{f"layers.{i}.v": ((1 << 12, 1 << 14), "float32") for i in range(2)},
       "norm": ((1 << 19,), "float32")}


@pytest.fixture(scope="module")
def classes():
    with rl_ray.session(object_store_memory=200 << 20):
        import weight_sync_actors as w
        yield ray.remote(num_cpus=0)(w.SyncTrainer), ray.remote(num_cpus=0, max_restarts=1)(w.SyncRollout)


def _sync(trainer, rollouts, bucket_bytes, timeout=120):
    refs = [trainer.sync.remote(bucket_bytes)] + [r.sync.remote(bucket_bytes) for r in rollouts]
    return ray.get(refs, timeout=timeout)


def test_one_gib_model_bit_for_bit_with_staggered_rollouts(classes):
    Trainer, Rollout = classes
    trainer = Trainer.remote(GIB, 21)
    rollouts = []
    for _ in range(2):
        rollouts.append(Rollout.remote())
        time.sleep(1.0)  # created seconds apart
    last = time.monotonic()
    ws.create_group(trainer, rollouts, backend="cpu", timeout=60, join_timeout=120)
    formed = time.monotonic() - last
    reports = _sync(trainer, rollouts, 128 << 20, timeout=300)
    sent = ray.get(trainer.described.remote(), timeout=120)
    assert reports[0]["bytes"] >= 1 << 30 and reports[0]["buckets"] == 7, reports[0]
    for r in rollouts:
        assert ray.get(r.described.remote(), timeout=120) == sent  # every tensor's sha256, shape, dtype, name
    assert all(rep["lost"] == [] for rep in reports)
    print(f"group formed {formed:.2f} s after the last rollout's creation; "
          f"1 GiB sync {reports[0]['seconds']:.2f} s to 2 rollouts")
    for a in [trainer] + rollouts:
        ray.kill(a)


def _call_when_restarted(method, timeout=60):
    # The example's retry (Ray answers ActorUnavailableError while the actor restarts).
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "examples", "elastic_weight_sync.py")
    spec = importlib.util.spec_from_file_location("elastic_weight_sync_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example.get_when_restarted(ray, method, timeout)


def test_rollout_killed_mid_sync_the_rest_finish_and_its_restart_gets_current_weights(classes):
    Trainer, Rollout = classes
    trainer = Trainer.remote(SMALL, 22)
    rollouts = [Rollout.remote(die_at_bucket=1 if i == 1 else None) for i in range(3)]
    ws.create_group(trainer, rollouts, backend="cpu", timeout=30, join_timeout=120)
    bucket = 16 << 10  # several buckets: the death comes after the second
    refs = [trainer.sync.remote(bucket)] + [r.sync.remote(bucket) for r in rollouts]
    rep = ray.get(refs[0], timeout=60)
    assert rep["lost"] == [2], rep  # rollout 1 is the group's rank 2
    assert rep["world_size"] == 3 and rep["buckets"] >= 3, rep
    assert rep["recovered_s"][0] < 2.0, rep  # the trainer went on within 2 s of the death
    print(f"trainer resumed {rep['recovered_s'][0]:.3f} s after the error, at bucket {rep['resumed_at']}")
    for i in (0, 2):
        got = ray.get(refs[1 + i], timeout=60)
        assert got["lost"] == [2] and got["world_size"] == 3, got
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(refs[2], timeout=60)
    sent = ray.get(trainer.described.remote())
    for i in (0, 2):
        assert ray.get(rollouts[i].described.remote()) == sent
        assert ray.get(rollouts[i].serve.remote()) == 1  # they keep serving
    # Ray restarts rollout 1; it asked to rejoin in its constructor, the next sync takes it back
    state = _call_when_restarted(rollouts[1].state)
    assert state["restarted"] and state["rejoining"], state
    ray.get(trainer.train_step.remote(1))
    reports = _sync(trainer, rollouts, bucket)
    assert [r["world_size"] for r in reports] == [4] * 4, reports
    assert reports[0]["members"] == [0, 1, 2, 3]
    sent = ray.get(trainer.described.remote())
    for r in rollouts:
        assert ray.get(r.described.remote()) == sent  # the restarted one too: the current weights
    assert ray.get(rollouts[1].serve.remote()) == 1
    for a in [trainer] + rollouts:
        ray.kill(a)


def test_a_bad_bucket_size_is_refused():
    import actorcc
    with pytest.raises(actorcc.InvalidArgumentError):
        ws.Sender("weights", bucket_bytes=0)
