"""OpenRLHF (0.11.2) weight sync through ray.util.collective with vllm.sync_backend = "actorcc":
actorcc's backend registered in the trainer and in the vLLM workers, OpenRLHF's exact calls
(mirrored in openrlhf_actors.py: OpenRLHF itself needs deepspeed and vLLM), real Ray actors on CPU.
Weights arrive bit for bit; a vLLM engine killed during a sync fails the trainer's broadcast within
seconds naming its rank, and after shrink_collective_group the survivors sync again."""
import time

import pytest

ray = pytest.importorskip("ray")
torch = pytest.importorskip("torch")
pytest.importorskip("ray.util.collective.backend_registry")  # Ray with register_collective_backend

import rl_ray  # noqa: E402

pytestmark = pytest.mark.ray

# OpenRLHF sends one parameter per broadcast, named as the trainer's model names them.
SPEC = {"model.embed_tokens.weight": ((1024, 256), "bfloat16"),
        "model.layers.0.self_attn.q_proj.weight": ((256, 256), "bfloat16"),
        "model.layers.0.mlp.up_proj.weight": ((512, 256), "float32"),
        "model.layers.0.input_layernorm.weight": ((256,), "float32"),
        "model.layers.1.mlp.down_proj.weight": ((256, 512), "bfloat16"),
        "lm_head.weight": ((1024, 256), "float32")}


@pytest.fixture(scope="module")
def classes():
    # the one setting: every worker process of the job registers actorcc's backend as it starts
    with rl_ray.session(runtime_env={"worker_process_setup_hook": "actorcc.ray.register_backend"}):
        import openrlhf_actors
        yield ray.remote(num_cpus=0)(openrlhf_actors.Trainer), ray.remote(num_cpus=0)(openrlhf_actors.VllmWorker)


def _engines(VllmWorker, n, stagger):
    engines = []
    for i in range(n):
        engines.append(VllmWorker.remote(delay=0.3 * i))
        time.sleep(stagger)
    return engines


def test_openrlhf_broadcast_pattern_bit_for_bit(classes):
    Trainer, VllmWorker = classes
    trainer = Trainer.remote(SPEC, 11)
    engines = _engines(VllmWorker, 3, stagger=1.0)  # created seconds apart, as OpenRLHF's engines start
    assert ray.get(trainer.init_group.remote(engines, "actorcc", "openrlhf"), timeout=120) == [1, 2, 3]
    outcome, failed, _ = ray.get(trainer.broadcast_to_vllm.remote(engines), timeout=120)
    assert failed is None and [o[0] for o in outcome] == ["ok"] * len(SPEC), outcome
    sent = ray.get(trainer.described.remote())
    assert set(sent) == set(SPEC)
    for got in ray.get([e.described.remote() for e in engines]):
        assert got == sent  # names, shapes, dtypes and sha256 of every parameter
    for a in [trainer] + engines:
        ray.kill(a)


def test_engine_killed_during_sync_fails_the_trainer_at_once_and_the_rest_sync_after_a_shrink(classes):
    Trainer, VllmWorker = classes
    trainer = Trainer.remote(SPEC, 12)
    engines = _engines(VllmWorker, 3, stagger=0.0)
    ray.get(trainer.init_group.remote(engines, "actorcc", "openrlhf_kill"), timeout=120)
    victim = list(SPEC)[2]
    ray.get(engines[1].die_when_receiving.remote(victim))
    outcome, refs, took = ray.get(trainer.broadcast_to_vllm.remote(engines), timeout=120)
    assert [o[0] for o in outcome] == ["ok", "ok", "error"], outcome
    _, name, culprit, msg, _ = outcome[-1]
    assert name == victim and culprit == 2, outcome[-1]  # engine 1 is rank 2 (rank_offset 1 + 1)
    assert "rank 2" in msg, msg
    assert took < 15, f"the trainer's sync ended {took:.1f} s after it began"
    # the other engines' receives ended too, naming the same rank; the dead one is gone
    results = [ray.get(r, timeout=60) for i, r in enumerate(refs) if i != 1]
    assert all(r[0] == "error" and r[2] == 2 for r in results), results
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(refs[1], timeout=60)
    # the survivors go on without it (actorcc's elastic shrink), and the next sync is whole
    survivors = [engines[0], engines[2]]
    assert ray.get([trainer.shrink.remote()] + [e.shrink.remote() for e in survivors], timeout=60) == [3, 3, 3]
    outcome, failed, _ = ray.get(trainer.broadcast_to_vllm.remote(survivors), timeout=120)
    assert failed is None and [o[0] for o in outcome] == ["ok"] * len(SPEC), outcome
    sent = ray.get(trainer.described.remote())
    for got in ray.get([e.described.remote() for e in survivors]):
        assert got == sent
    for a in [trainer] + survivors:
        ray.kill(a)
