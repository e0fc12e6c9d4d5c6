"""verl's checkpoint engine "actorcc" (actorcc.rl.verl) against verl 0.9.1's interface: registered
in verl's CheckpointEngineRegistry by importing the module checkpoint_engine.custom_backend_module
names, and driven with real Ray actors through the steps verl's CheckpointEngineManager takes for
each update (prepare, build_topology, init_process_group, send/receive_weights, finalize). Runs
against the installed verl when it imports, else against verl_mirror (which says what it mirrors)."""
import importlib
import time

import pytest

ray = pytest.importorskip("ray")
torch = pytest.importorskip("torch")

import rl_ray  # noqa: E402

pytestmark = pytest.mark.ray

SPEC = {"model.embed_tokens.weight": ((512, 128), "bfloat16"), "model.layers.0.mlp.up_proj.weight": ((128, 512), "float32"),
        "model.layers.0.input_layernorm.weight": ((128,), "float32"), "lm_head.weight": ((512, 128), "bfloat16")}
BUCKET = 64 << 10  # several buckets per update


def test_registered_in_verls_registry():
    import verl_mirror
    base = verl_mirror.install()
    mod = importlib.reload(importlib.import_module("actorcc.rl.verl"))
    cls = base.CheckpointEngineRegistry.get("actorcc")
    assert cls is mod.ActorccCheckpointEngine and issubclass(cls, base.CheckpointEngine)
    engine = base.CheckpointEngineRegistry.new("actorcc", bucket_size=1 << 20, is_master=False)
    assert engine.prepare() == {"uid": None}
    actor, rollout = cls.build_topology(2, 3, [{"uid": "x"}, {"uid": None}] + [{"uid": None}] * 3)
    assert actor["rank"] == [0, -1] and rollout["rank"] == [1, 2, 3]
    assert actor["world_size"] == rollout["world_size"][:2] == [4, 4]
    with pytest.raises(ValueError):
        cls.build_topology(1, 1, [{"uid": None}, {"uid": None}])


@pytest.fixture(scope="module")
def worker():
    with rl_ray.session():
        import verl_actors
        yield ray.remote(num_cpus=0)(verl_actors.VerlWorker)


def _update(actor_wg, rollout, global_steps):
    """CheckpointEngineManager.update_weights' steps 4-6, as verl 0.9.1 takes them."""
    import verl_mirror
    cls = verl_mirror.install().CheckpointEngineRegistry.get("actorcc")
    metadata = ray.get([w.execute_checkpoint_engine.remote("prepare") for w in actor_wg + rollout], timeout=60)
    actor_kw, rollout_kw = cls.build_topology(len(actor_wg), len(rollout), metadata)
    ray.get([w.execute_checkpoint_engine.remote("init_process_group", **{k: v[i] for k, v in kw.items()})
             for ws, kw in ((actor_wg, actor_kw), (rollout, rollout_kw)) for i, w in enumerate(ws)], timeout=120)
    refs = [w.update_weights.remote(global_steps=global_steps) for w in actor_wg + rollout]
    return refs


def _finalize(workers):
    ray.get([w.execute_checkpoint_engine.remote("finalize") for w in workers], timeout=60)


def test_update_weights_bit_for_bit_then_a_rollout_dies_mid_update(worker):
    import verl_mirror
    verl_mirror.install()
    import actorcc.rl.verl  # noqa: F401 - registers in the driver too (the manager's CheckpointEngineRegistry.get)
    actor_wg = [worker.remote("actor", BUCKET, is_master=(r == 0), spec=SPEC, seed=31) for r in range(2)]
    rollout = []
    for i in range(3):
        rollout.append(worker.remote("rollout", BUCKET, die_at_bucket=1 if i == 1 else None))
        time.sleep(0.5)  # rollout workers come up one by one
    sent = ray.get(actor_wg[0].described.remote())
    # first update: rollout 1 dies after its first bucket; the others finish it
    refs = _update(actor_wg, rollout, global_steps=1)
    metrics = ray.get(refs[0], timeout=120)
    assert metrics["actorcc/lost_rollout_ranks"] == [2], metrics  # rollout 1 is the group's rank 2
    assert ray.get(refs[1], timeout=60) == {}  # the other actor worker sat out
    for i in (0, 2):
        ray.get(refs[2 + i], timeout=60)
        assert ray.get(rollout[i].described.remote()) == sent  # every weight, bit for bit
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(refs[3], timeout=60)
    survivors = [rollout[0], rollout[2]]
    _finalize(actor_wg + survivors)
    # the next update's topology has the workers verl has now (a fresh replica for the dead one)
    fresh = worker.remote("rollout", BUCKET)
    refs = _update(actor_wg, survivors + [fresh], global_steps=2)
    metrics = ray.get(refs[0], timeout=120)
    assert metrics["actorcc/lost_rollout_ranks"] == [] and metrics["actorcc/bytes"] > 0, metrics
    ray.get(refs[1:], timeout=60)
    for w in survivors + [fresh]:
        assert ray.get(w.described.remote()) == sent
    _finalize(actor_wg + survivors + [fresh])
    for a in actor_wg + survivors + [fresh]:
        ray.kill(a)
