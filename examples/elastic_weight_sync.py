#!/usr/bin/env python3
"""Elastic weight sync in Ray: an inference actor dies in the middle of a weight broadcast, the
others go on without it, and Ray's restart of it rejoins the group. No GPU needed.

    python examples/elastic_weight_sync.py                  # 1 trainer + 3 inference actors
    python examples/elastic_weight_sync.py --inference 4 --steps 5

A trainer actor keeps broadcasting its model's weights (many tensors, packed into buckets) to an
inference group over one actorcc group "sync" (the trainer is rank 0). In step 1, inference
actor `--victim` exits (os._exit) after receiving some of the buckets, while the others are
inside the next bucket's broadcast:

1. The trainer and the other inference actors get an actorcc.RemoteError naming the dead rank.
   They call actorcc.ray.shrink_group("sync") (it excludes the rank the error names) and send
   the whole sync again, to the survivors only. The trainer process does not restart.
2. Ray restarts the dead actor (max_restarts=1). Its constructor calls
   actorcc.ray.rejoin_group("sync"), which finds its original rank in Ray's KV store and asks to
   come back. Every member calls actorcc.ray.grow_group("sync") at the start of each sync; the
   next one takes it back at its original rank, and it receives the current weights.
3. After every step the driver compares every actor's weights with the trainer's, bit for bit.

Every ray.get has a timeout, and the group's calls have one (timeout=20 s), so nothing hangs.
"""
import argparse
import os
import sys
import time

import numpy as np

GROUP = "sync"
BUCKET_BYTES = 64 << 10  # the model spans several buckets


def make_model(seed):
    """A model's weights: many tensors of several shapes and dtypes (as a state_dict)."""
    rng = np.random.default_rng(seed)
    model = {}
    for i in range(12):
        model[f"layer{i}.weight"] = rng.standard_normal((96, 64 + 8 * i)).astype(np.float32)
        model[f"layer{i}.bias"] = rng.standard_normal(96 + i).astype(np.float32)
        model[f"layer{i}.scale"] = rng.standard_normal(33).astype(np.float16)
    model["embed.table"] = rng.standard_normal((257, 40)).astype(np.float64)
    model["step"] = np.zeros(1, np.int64)
    return model


def buckets(model):
    """The tensors' names, grouped so that each group holds at most BUCKET_BYTES (or one tensor)."""
    group, size = [], 0
    for name, t in model.items():
        if group and size + t.nbytes > BUCKET_BYTES:
            yield group
            group, size = [], 0
        group.append(name)
        size += t.nbytes
    if group:
        yield group


def fingerprint(model):
    """The model's bytes, tensor by tensor: equal fingerprints are equal weights, bit for bit."""
    return b"".join(name.encode() + model[name].tobytes() for name in sorted(model))


class Member:
    """The sync, the same on the trainer (rank 0, the sender) and the inference actors."""

    def __init__(self):
        self.model = None
        self.die_at = None

    def pid(self):
        return os.getpid()

    def weights(self):
        return fingerprint(self.model)

    def sync(self, step):
        """One weight sync; returns what happened. Collective over the group's members."""
        import actorcc
        import actorcc.ray

        report = {"step": step, "world": None, "errors": [], "culprits": [], "recovered_s": None, "grow_s": None}
        while True:  # one attempt of the whole sync; a member's death ends it on every member
            try:
                t0 = time.monotonic()
                comm = actorcc.ray.grow_group(GROUP)  # takes back restarted actors that asked to rejoin
                report["grow_s"] = time.monotonic() - t0
                report["world"] = report["world"] or comm.world_size
                self._send_or_receive(comm, step)
                comm.barrier()  # every member got every bucket: no rank leaves an attempt the others failed
                break
            except (actorcc.RemoteError, actorcc.TimeoutError) as e:
                failed_at = time.monotonic()
                report["errors"].append(f"{type(e).__name__} (culprit rank {e.culprit}): {str(e).splitlines()[0]}")
                report["culprits"].append(e.culprit)
                comm = actorcc.ray.shrink_group(GROUP)  # without the rank the error names; renumbered
        if report["errors"]:  # the error -> the whole sync done again on the shrunk group
            report["recovered_s"] = time.monotonic() - failed_at
        report.update(world_after=comm.world_size, rank=comm.rank, members=actorcc.ray.group_members(GROUP))
        return report

    def _send_or_receive(self, comm, step):
        """Every bucket from the trainer (rank 0): one flat buffer per bucket, per dtype."""
        for i, names in enumerate(buckets(self.model)):
            if self.die_at == (step, i):
                os._exit(1)  # this inference actor dies here, in the middle of the weight broadcast
            for dtype in sorted({self.model[n].dtype.str for n in names}):
                part = [n for n in names if self.model[n].dtype.str == dtype]
                flat = np.concatenate([self.model[n].reshape(-1) for n in part])
                comm.broadcast(flat, root=0)
                at = 0
                for n in part:
                    t = self.model[n]
                    t[...] = flat[at:at + t.size].reshape(t.shape)
                    at += t.size


class Trainer(Member):
    def __init__(self, seed):
        super().__init__()
        self.model = make_model(seed)

    def train_step(self, step):
        rng = np.random.default_rng([step, 7])
        for t in self.model.values():  # an "optimizer step": every tensor changes
            t += (rng.standard_normal(t.shape) * 0.01).astype(t.dtype) if t.dtype.kind == "f" else 1
        return step


class Inference(Member):
    def __init__(self, seed, die_at=None):
        import ray

        import actorcc.ray

        super().__init__()
        # Other weights than the trainer's: only the sync makes them equal.
        self.model = {n: np.full_like(t, 7) for n, t in make_model(seed).items()}
        self.restarted = ray.get_runtime_context().was_current_actor_reconstructed
        self.die_at = None if self.restarted else die_at  # dies once; its restart lives
        # After Ray's restart: ask to come back into "sync" at the original rank (False on the
        # first start: create_group adds the actor then).
        self.rejoining = actorcc.ray.rejoin_group(GROUP)

    def state(self):
        return {"pid": os.getpid(), "restarted": self.restarted, "rejoining": self.rejoining}


def get_when_restarted(ray, method, timeout):
    """ray.get(method.remote()) on an actor that Ray is restarting: until the new process is up,
    Ray may answer ActorUnavailableError ("the actor is restarting") at once instead of waiting,
    so the call is made again until it runs (bounded by `timeout`)."""
    unavailable = getattr(ray.exceptions, "ActorUnavailableError", ())
    end = time.monotonic() + timeout
    while True:
        try:
            return ray.get(method.remote(), timeout=max(1.0, end - time.monotonic()))
        except unavailable:
            if time.monotonic() > end:
                raise
            time.sleep(0.2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inference", type=int, default=3, help="inference actors (default 3)")
    ap.add_argument("--steps", type=int, default=4, help="syncs (at least 3: the kill is in step 1)")
    ap.add_argument("--victim", type=int, default=1, help="the inference actor that dies (0-based)")
    ap.add_argument("--kill-bucket", type=int, default=2, help="the bucket of step 1 it dies before")
    args = ap.parse_args()

    import ray

    import actorcc.ray

    t0 = time.monotonic()
    if not ray.is_initialized():
        ray.init(num_cpus=args.inference + 1, include_dashboard=False, log_to_driver=False)
    seed = 1234
    trainer = ray.remote(num_cpus=0)(Trainer).remote(seed)
    inference = [ray.remote(num_cpus=0, max_restarts=1)(Inference).remote(
        seed + 1 + i, die_at=(1, args.kill_bucket) if i == args.victim else None) for i in range(args.inference)]
    actors = [trainer] + inference
    actorcc.ray.create_group(actors, name=GROUP, backend="cpu", timeout=20, join_timeout=60)
    trainer_pid = ray.get(trainer.pid.remote(), timeout=30)
    n_buckets = len(list(buckets(make_model(seed))))
    print(f"trainer pid {trainer_pid}, {len(inference)} inference actors, "
          f"{len(make_model(seed))} tensors in {n_buckets} buckets per sync")

    failed = []
    for step in range(args.steps):
        ray.get(trainer.train_step.remote(step), timeout=30)
        refs = [a.sync.remote(step) for a in actors]
        died = []
        for i, ref in enumerate(refs):
            who = "trainer" if i == 0 else f"inference {i - 1}"
            try:
                rep = ray.get(ref, timeout=60)
            except ray.exceptions.RayActorError:
                died.append(i)
                print(f"step {step}: {who} died in the sync")
                continue
            for err in rep["errors"]:
                print(f"step {step}: {who} got {err}")
            if rep["culprits"] and rep["culprits"] != [1 + args.victim]:
                failed.append(f"step {step}: {who}'s errors named rank(s) {rep['culprits']}, not {1 + args.victim}")
            extra = f", {rep['recovered_s']:.3f} s from the error to the sync done without it" if rep["errors"] else ""
            if step == 2:  # the sync that takes the restarted actor back
                extra += f", grow_group {rep['grow_s']:.3f} s"
            print(f"step {step}: {who} synced as rank {rep['rank']} of {rep['world_after']} "
                  f"(members, by original rank: {rep['members']}){extra}")
            if step == 1 and i > 0 and i - 1 != args.victim and not rep["errors"]:
                failed.append(f"step 1: {who} did not see the death")
        for i in died:  # Ray restarts it; a call returns once its constructor (and rejoin request) ran
            st = get_when_restarted(ray, actors[i].state, timeout=60)
            print(f"step {step}: inference {i - 1} restarted by Ray (pid {st['pid']}), asked to rejoin: "
                  f"{st['rejoining']}")
        # Bit for bit: every actor that holds the current weights equals the trainer.
        want = ray.get(trainer.weights.remote(), timeout=30)
        for i, a in enumerate(actors[1:], 1):
            if i in died:
                continue  # rejoins at the next sync
            if ray.get(a.weights.remote(), timeout=30) != want:
                failed.append(f"step {step}: inference {i - 1}'s weights differ from the trainer's")
    if ray.get(trainer.pid.remote(), timeout=30) != trainer_pid:
        failed.append("the trainer process restarted")
    members = ray.get(trainer.__ray_call__.remote(lambda self: actorcc.ray.group_members(GROUP)), timeout=30)
    if members != list(range(len(actors))):
        failed.append(f"the group did not grow back to every actor: members {members}")
    ray.shutdown()
    if failed:
        print("FAILED\n" + "\n".join(failed), file=sys.stderr)
        return 1
    print(f"{len(inference)} inference actors, one killed mid-broadcast and restarted: every actor's weights equal "
          f"the trainer's bit for bit after every step; trainer pid {trainer_pid} unchanged; "
          f"{time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
