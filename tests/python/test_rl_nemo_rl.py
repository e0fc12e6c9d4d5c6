"""NeMo-RL's refit transport "actorcc.rl.nemo_rl:ActorccCheckpointEngine" against NeMo-RL's
CheckpointEngine interface (the installed NeMo-RL when it imports, else nemo_rl_mirror), with real
Ray actors: a refit's steps (prepare, init_policy/rollout_process_group, send_weights /
receive_weight_batches, finalize) move every weight bit for bit, a rollout worker killed mid-refit
leaves the policy and the other rollout workers whole, and the next refit works."""

import pytest

ray = pytest.importorskip("ray")
torch = pytest.importorskip("torch")

import rl_ray  # noqa: E402

pytestmark = pytest.mark.ray

SPEC = {"decoder.layers.0.self_attention.linear_qkv.weight": ((384, 128), "bfloat16"),
        "decoder.layers.0.mlp.linear_fc1.weight": ((512, 128), "float32"),
        "decoder.final_layernorm.weight": ((128,), "bfloat16"), "output_layer.weight": ((512, 128), "float32")}
BUCKET = 64 << 10


@pytest.fixture(scope="module")
def worker():
    with rl_ray.session():
        import nemo_rl_actors
        yield ray.remote(num_cpus=0)(nemo_rl_actors.RefitWorker)


def _refit(policy, rollout):
    metadata = ray.get([w.prepare.remote() for w in policy + rollout], timeout=60)
    sizes = {"train_world_size": len(policy), "rollout_world_size": len(rollout), "metadata": metadata}
    ray.get([w.init_policy.remote(worker_rank=r, **sizes) for r, w in enumerate(policy)]
            + [w.init_rollout.remote(rollout_rank=r, **sizes) for r, w in enumerate(rollout)], timeout=120)
    return [w.send.remote() for w in policy] + [w.receive.remote() for w in rollout]


def test_refit_bit_for_bit_and_a_rollout_killed_mid_refit(worker):
    policy = [worker.remote(BUCKET, spec=SPEC, seed=51) for _ in range(2)]
    rollout = [worker.remote(BUCKET, die_after_batches=1 if r == 1 else None) for r in range(3)]
    sent = ray.get(policy[0].described.remote())
    refs = _refit(policy, rollout)
    report = ray.get(refs[0], timeout=120)
    assert report["lost"] == [2], report  # rollout worker 1 is the group's rank 2
    assert ray.get(refs[1], timeout=60) is None  # policy worker 1 sat out
    for r in (0, 2):
        ray.get(refs[2 + r], timeout=60)
        assert ray.get(rollout[r].described.remote()) == sent
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(refs[3], timeout=60)
    survivors = [rollout[0], rollout[2]]
    ray.get([w.finalize.remote() for w in policy + survivors], timeout=60)
    refs = _refit(policy, survivors)  # the next refit, with the workers there are
    assert ray.get(refs[0], timeout=120)["lost"] == []
    ray.get(refs[1:], timeout=60)
    for w in survivors:
        assert ray.get(w.described.remote()) == sent
    ray.get([w.finalize.remote() for w in policy + survivors], timeout=60)
    for a in policy + survivors:
        ray.kill(a)
