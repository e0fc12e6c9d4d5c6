"""vLLM's weight transfer backend "actorcc" (actorcc.rl.vllm) against vLLM 0.33's interface: both
factories know it after the general plugin ran, and with real Ray actors the trainer engine's
trainer_init and send_weights drive the workers' engines through the client, weights loaded bit
for bit by model.load_weights bucket by bucket; a worker killed mid-sync leaves the trainer and the
other workers whole. Runs against the installed vLLM when it imports, else against vllm_mirror."""

import pytest

ray = pytest.importorskip("ray")
torch = pytest.importorskip("torch")

import rl_ray  # noqa: E402

pytestmark = pytest.mark.ray

SPEC = {"model.embed_tokens.weight": ((512, 128), "bfloat16"), "model.layers.0.self_attn.qkv_proj.weight": ((384, 128), "bfloat16"),
        "model.layers.0.mlp.gate_up_proj.weight": ((512, 128), "float32"), "model.norm.weight": ((128,), "float32")}
BUCKET = 64 << 10


def test_the_general_plugin_registers_both_engines():
    import vllm_mirror
    base, factory = vllm_mirror.install()
    import actorcc.rl.vllm_plugin
    actorcc.rl.vllm_plugin.register()
    actorcc.rl.vllm_plugin.register()  # idempotent
    from actorcc.rl.vllm import ActorccTrainerEngine, ActorccWeightTransferEngine
    assert factory.WeightTransferEngineFactory._registry["actorcc"]() is ActorccWeightTransferEngine
    assert factory.WeightTransferTrainerFactory._registry["actorcc"]() is ActorccTrainerEngine
    assert issubclass(ActorccWeightTransferEngine, base.WeightTransferEngine)
    assert issubclass(ActorccTrainerEngine, base.TrainerWeightTransferEngine)


@pytest.fixture(scope="module")
def classes():
    with rl_ray.session():
        import vllm_actors
        yield ray.remote(num_cpus=0)(vllm_actors.Trainer), ray.remote(num_cpus=0)(vllm_actors.VllmWorker)


def test_send_weights_bit_for_bit_and_a_worker_killed_mid_sync(classes):
    Trainer, VllmWorker = classes
    workers = [VllmWorker.remote(r, die_after_batches=1 if r == 1 else None) for r in range(3)]
    trainer = Trainer.remote(SPEC, 41, workers, BUCKET)  # trainer_init: the group forms
    sent = ray.get(trainer.described.remote(), timeout=120)
    report = ray.get(trainer.send_weights.remote(), timeout=120)
    assert report["lost"] == [2], report  # worker 1 is the group's rank 2
    for w in (workers[0], workers[2]):
        assert ray.get(w.described.remote()) == sent  # loaded bit for bit
    # the survivors serve on, and the next sync reaches them whole
    ray.get(trainer.set_workers.remote([workers[0], workers[2]]))
    report = ray.get(trainer.send_weights.remote(), timeout=120)
    assert report["lost"] == [] and report["world_size"] == 3, report
    for w in (workers[0], workers[2]):
        assert ray.get(w.described.remote()) == sent
    for a in [trainer, workers[0], workers[2]]:
        ray.kill(a)
