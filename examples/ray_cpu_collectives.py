#!/usr/bin/env python3
"""actorcc in Ray actors on CPUs: a group from actor handles, every collective, and the
ray.util.collective backend. No GPU needed; runs in about half a minute with Ray's start-up.

    python examples/ray_cpu_collectives.py              # 4 actors
    python examples/ray_cpu_collectives.py --world 2

1. actorcc.ray.create_group(actors): the UniqueId is made here, in the driver (the group's
   root runs in this process for the group's whole life), and every actor joins, in any
   order; inside the actors actorcc.ray.get_group(name) is an actorcc.Communicator.
2. actorcc.ray.create_collective_group(actors): the same group behind Ray's own API,
   ray.util.collective.allreduce(tensor, group_name=...) in the actors.
On GPUs: give the actors num_gpus=1 and pass CUDA tensors (torch, cupy); backend="auto"
picks the CUDA backend.
"""
import argparse
import sys
import time

import numpy as np


class Worker:
    """A plain class: ray.remote wraps it; actorcc needs no base class or special method."""

    def __init__(self, seed):
        self.seed = seed

    def data(self, rank, n):
        return np.random.default_rng([self.seed, rank]).integers(-100, 100, n).astype(np.float32)

    def collectives(self, name, world):
        import actorcc.ray

        comm = actorcc.ray.get_group(name)
        r, n = comm.rank, 64 * world
        everyone = [self.data(q, n) for q in range(world)]
        x = self.data(r, n)
        comm.all_reduce(x)
        assert np.array_equal(x, np.sum(everyone, axis=0))
        assert np.array_equal(comm.all_reduce(self.data(r, n), op="min"), np.min(everyone, axis=0))
        k = n // world
        assert np.array_equal(comm.reduce_scatter(self.data(r, n)), np.sum(everyone, axis=0)[r * k:(r + 1) * k])
        assert np.array_equal(comm.all_gather(self.data(r, n)), np.concatenate(everyone))
        b = self.data(r, n)
        comm.broadcast(b, root=0)
        assert np.array_equal(b, everyone[0])
        comm.barrier()
        return f"rank {r}: all_reduce sum and min, reduce_scatter, all_gather, broadcast, barrier checked"

    def ray_collective(self, group_name, world):
        import ray.util.collective as col

        r = col.get_rank(group_name)
        x = self.data(r, 16)
        col.allreduce(x, group_name=group_name)
        assert np.array_equal(x, np.sum([self.data(q, 16) for q in range(world)], axis=0))
        b = self.data(r, 16)
        col.broadcast(b, src_rank=world - 1, group_name=group_name)
        assert np.array_equal(b, self.data(world - 1, 16))
        col.barrier(group_name=group_name)
        return f"rank {r}: ray.util.collective allreduce, broadcast, barrier checked"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, default=4, help="number of actors (default 4)")
    args = ap.parse_args()

    import ray

    import actorcc.ray

    t0 = time.monotonic()
    ray.init(num_cpus=args.world, include_dashboard=False, log_to_driver=False)
    seed = int(time.time())  # one seed for all: each actor can compute every rank's input
    actors = [ray.remote(num_cpus=0)(Worker).remote(seed) for _ in range(args.world)]

    actorcc.ray.create_group(actors, name="demo", backend="cpu", join_timeout=60)
    for line in ray.get([a.collectives.remote("demo", args.world) for a in actors]):
        print(line)
    actorcc.ray.destroy_group(actors, "demo")

    actorcc.ray.create_collective_group(actors, group_name="demo_col", backend="cpu", join_timeout=60)
    for line in ray.get([a.ray_collective.remote("demo_col", args.world) for a in actors]):
        print(line)

    ray.shutdown()  # the actors and their groups end with it
    print(f"{args.world} Ray actors, both APIs checked, in {time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
