"""Ray Direct Transport (Ray 2.60's ray.experimental.register_tensor_transport) on actorcc, with
real Ray actors on CPU tensors: actorcc.ray.register_tensor_transport() in the driver, then
@ray.method(tensor_transport="ACTORCC") moves the tensors bit for bit with no other setup; a
peer killed half way through a transfer fails the other side within seconds naming the dead
actor, and the survivor keeps serving; abort_transport ends a transfer whose peer is stuck."""
import os
import time

import pytest

ray = pytest.importorskip("ray")
torch = pytest.importorskip("torch")
rdt_util = pytest.importorskip("ray.experimental.rdt.util")

import actorcc  # noqa: E402
import actorcc.ray  # noqa: E402

import rl_ray  # noqa: E402

pytestmark = pytest.mark.ray

SPEC = {"embed": ((512, 256), "bfloat16"), "w1": ((256, 1024), "float32"), "b1": ((1024,), "float32"),
        "scalar": ((), "float32"), "empty": ((0, 8), "bfloat16"), "mask": ((33,), "bool"), "ids": ((7, 3), "int64")}
# Two tensors of 16 MiB: the death comes after the first, with the second still to move.
BIG = {"a": ((1 << 22,), "float32"), "b": ((1 << 22,), "float32")}


@pytest.fixture(scope="module")
def actors():
    with rl_ray.session():
        # the one call, before the actors are created; a second call is harmless
        assert actorcc.ray.register_tensor_transport(timeout=30, join_timeout=30) == "ACTORCC"
        assert actorcc.ray.register_tensor_transport() == "ACTORCC"
        import rl_actors
        yield tuple(ray.remote(num_cpus=0, enable_tensor_transport=True)(c) for c in rl_actors.actor_classes())


def test_registered_under_rays_own_registry():
    from ray.experimental.rdt.tensor_transport_manager import TensorTransportManager
    from actorcc.ray.transport_manager import ActorccTensorTransport
    actorcc.ray.register_tensor_transport()
    info = rdt_util.transport_manager_info["ACTORCC"]
    assert info.transport_manager_class is ActorccTensorTransport
    assert issubclass(ActorccTensorTransport, TensorTransportManager)
    assert set(info.devices) == {"cuda", "cpu"} and info.data_type is torch.Tensor
    assert ActorccTensorTransport.can_abort_transport() and not ActorccTensorTransport.is_one_sided()


def test_weights_arrive_bit_for_bit(actors):
    import rl_actors
    Trainer, Rollout = actors
    trainer = Trainer.remote(seed=3)
    rollouts = [Rollout.remote() for _ in range(3)]
    ref = trainer.weights.remote(SPEC)
    got = ray.get([r.load.remote(ref) for r in rollouts], timeout=120)
    sent = ray.get(trainer.described.remote())
    expect = rl_actors.describe(rl_actors.make(SPEC, 3))
    assert sent == expect
    for g in got:
        assert g == expect  # names, shapes, dtypes and sha256 of every tensor
    # the bytes went over actorcc: one pair group per rollout in the trainer, one in each rollout
    assert len(ray.get(trainer.groups.remote())) == 3
    assert [len(g) for g in ray.get([r.groups.remote() for r in rollouts])] == [1, 1, 1]
    # a second object reuses the pair groups
    ref2 = trainer.weights.remote(SPEC)
    assert ray.get(rollouts[0].load.remote(ref2)) == expect
    assert len(ray.get(trainer.groups.remote())) == 3
    for a in [trainer] + rollouts:
        ray.kill(a)


def _stamp(tmp_path, name):
    return str(tmp_path / f"{name}.killed")


def _killed_at(path):
    deadline = time.monotonic() + 30
    while not os.path.exists(path):
        assert time.monotonic() < deadline, "the actor did not reach its transfer"
        time.sleep(0.01)
    time.sleep(0.05)  # the stamp is written just before the kill
    with open(path) as f:
        return float(f.read())


def test_sender_killed_mid_transfer_names_it_and_the_receiver_serves_on(actors, tmp_path):
    import rl_actors
    Trainer, Rollout = actors
    trainer, spare, rollout = Trainer.remote(seed=1), Trainer.remote(seed=2), Rollout.remote()
    trainer_id = trainer._actor_id.hex()
    stamp = _stamp(tmp_path, "trainer")
    ray.get(trainer.die_during_next_transfer.remote(stamp))
    ref = trainer.weights.remote(BIG)
    with pytest.raises(Exception) as ei:
        ray.get(rollout.load.remote(ref), timeout=60)
    failed = time.time()
    killed = _killed_at(stamp)
    msg = str(ei.value)
    assert trainer_id in msg and "Trainer" in msg, msg
    assert "actorcc Ray tensor transport" in msg, msg
    assert failed - killed < 5, f"the receiver's transfer ended {failed - killed:.2f} s after the sender's death"
    print(f"receiver's error {failed - killed:.3f} s after the sender's death")
    # the receiver keeps serving: a transfer from another trainer arrives whole
    ref = spare.weights.remote(SPEC)
    assert ray.get(rollout.load.remote(ref), timeout=60) == rl_actors.describe(rl_actors.make(SPEC, 2))
    errs = ray.get(rollout.errors.remote())
    assert len(errs) == 1 and errs[0]["role"] == "recv" and trainer_id in errs[0]["peer"], errs
    for a in (spare, rollout):
        ray.kill(a)


def test_receiver_killed_mid_transfer_frees_the_trainer_naming_it(actors, tmp_path):
    import rl_actors
    Trainer, Rollout = actors
    trainer, doomed, healthy = Trainer.remote(seed=4), Rollout.remote(), Rollout.remote()
    doomed_id = doomed._actor_id.hex()
    stamp = _stamp(tmp_path, "rollout")
    ray.get(doomed.die_during_next_transfer.remote(stamp))
    ref = trainer.weights.remote(BIG)
    lost = doomed.load.remote(ref)
    killed = _killed_at(stamp)
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(lost, timeout=60)
    # the trainer is not held: its next transfer, to a live rollout, completes
    ok = healthy.load.remote(ref)
    assert ray.get(ok, timeout=60) == rl_actors.describe(rl_actors.make(BIG, 4))
    deadline = time.monotonic() + 10
    while not ray.get(trainer.errors.remote()):
        assert time.monotonic() < deadline, "the trainer's send did not fail"
        time.sleep(0.05)
    errs = ray.get(trainer.errors.remote())
    assert len(errs) == 1 and errs[0]["role"] == "send", errs
    assert doomed_id in errs[0]["error"] and "Rollout" in errs[0]["error"], errs
    assert errs[0]["time"] - killed < 5, f"the trainer's send ended {errs[0]['time'] - killed:.2f} s after the death"
    print(f"sender's error {errs[0]['time'] - killed:.3f} s after the receiver's death")
    for a in (trainer, healthy):
        ray.kill(a)


def test_abort_transport_ends_a_transfer_whose_peer_is_stuck(actors):
    from ray.experimental.rdt.rdt_store import __ray_abort_transport__
    from ray.experimental.rdt.util import get_tensor_transport_manager
    Trainer, Rollout = actors
    trainer, rollout = Trainer.remote(seed=5), Rollout.remote()
    ray.get(trainer.stall_next_transfer.remote(600))
    ref = trainer.weights.remote(BIG)
    pending = rollout.load.remote(ref)
    time.sleep(1.0)  # the rollout is inside its receive, the trainer stuck
    ready, _ = ray.wait([pending], timeout=0)
    assert not ready
    # what Ray's failure monitor does when a transfer times out: abort_transport in the actors
    meta = get_tensor_transport_manager("ACTORCC").get_communicator_metadata(trainer, rollout, "ACTORCC")
    t0 = time.monotonic()
    rollout.__ray_call__.options(concurrency_group="_ray_system_error").remote(
        __ray_abort_transport__, ref.hex(), meta, "ACTORCC")
    with pytest.raises(Exception) as ei:
        ray.get(pending, timeout=30)
    assert time.monotonic() - t0 < 10
    msg = str(ei.value)
    assert "Ray aborted the transfer" in msg and trainer._actor_id.hex() in msg, msg
    ray.kill(trainer)
    ray.kill(rollout)
