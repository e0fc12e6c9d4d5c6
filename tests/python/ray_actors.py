"""Actor class for the Ray tests (a plain class: tests wrap it with ray.remote, which needs
no special base class or method for actorcc)."""
import os
import time

import numpy as np

import actorcc
import actorcc.ray


def pattern(n, start=0):
    """Position-dependent factors (1..13, period 13 along the index): each rank's input is its
    own value times these, so a chunk from the wrong rank or at a wrong offset changes the
    result, and every sum stays exact in float32."""
    return (1 + (np.arange(start, start + n) * 7919) % 13).astype(np.float64)


class Worker:
    def __init__(self, delay=0.0):
        time.sleep(delay)  # actors that take seconds to start, as real ones loading a model do
        self.started = time.time()

    def pid(self):
        return os.getpid()

    def allreduce(self, name, value, n=16, op="sum"):
        comm = actorcc.ray.get_group(name)
        x = (value * pattern(n)).astype(np.float32)
        comm.all_reduce(x, op=op)
        return x

    def timed_allreduce(self, name, n=1 << 16):
        comm = actorcc.ray.get_group(name)
        t0 = time.monotonic()
        try:
            comm.all_reduce(np.ones(n, np.float32))
            return ("ok", time.monotonic() - t0, None, None)
        except actorcc.Error as e:
            return (type(e).__name__, time.monotonic() - t0, getattr(e, "rank", None), str(e))

    def sleep(self, s):
        time.sleep(s)
        return s

    def native_init(self, world, rank, group_name):
        import ray.util.collective as col
        actorcc.ray.register_backend(timeout=30, join_timeout=60)
        col.init_collective_group(world, rank, backend="ACTORCC", group_name=group_name)
        return col.get_rank(group_name)

    def col_ops(self, group_name):
        """Every ray.util.collective call the actorcc backend supports; returns the results."""
        import ray.util.collective as col
        from ray.util.collective.types import ReduceOp
        # the first call forms a group declared with ray's create_collective_group (get_rank
        # alone does not)
        col.barrier(group_name=group_name)
        rank = col.get_rank(group_name)
        world = col.get_collective_group_size(group_name)
        out = {"rank": rank, "world": world}
        x = ((rank + 1) * pattern(4)).astype(np.float32)
        col.allreduce(x, group_name=group_name)
        out["allreduce"] = x.tolist()
        m = np.array([rank], np.int64)
        col.allreduce(m, group_name=group_name, op=ReduceOp.MAX)
        out["allreduce_max"] = int(m[0])
        b = ((rank + 1) * pattern(3)).astype(np.int32)
        col.broadcast(b, src_rank=world - 1, group_name=group_name)
        out["broadcast"] = b.tolist()
        outs = [np.zeros(2, np.float64) for _ in range(world)]
        col.allgather(outs, (rank + 1) * pattern(2), group_name=group_name)
        out["allgather"] = [o.tolist() for o in outs]
        res = np.zeros(2, np.float32)
        col.reducescatter(res, [((i + rank + 1) * pattern(2, 2 * i)).astype(np.float32) for i in range(world)],
                          group_name=group_name)
        out["reducescatter"] = res.tolist()
        r = ((rank + 1) * pattern(2)).astype(np.float32)
        col.reduce(r, dst_rank=0, group_name=group_name)
        out["reduce"] = r.tolist()
        col.barrier(group_name=group_name)
        return out

    def col_p2p(self, group_name, n=1001):
        """ray.util.collective send/recv around a ring (even ranks send first, odd ranks
        receive first, so the blocking calls pair up), then twice more with n_elements."""
        import ray.util.collective as col
        rank = col.get_rank(group_name)
        world = col.get_collective_group_size(group_name)
        right, left = (rank + 1) % world, (rank - 1) % world
        mine = np.random.default_rng([7, rank]).integers(-100, 100, n).astype(np.float32)
        got = np.full(n, np.nan, np.float32)
        for leg in range(2):
            if rank % 2 == leg:
                col.send(mine, right, group_name=group_name)
            else:
                col.recv(got, left, group_name=group_name)
        want = np.random.default_rng([7, left]).integers(-100, 100, n).astype(np.float32)
        return bool(np.array_equal(got, want)), got[:4].tolist(), want[:4].tolist()


class ElasticWorker:
    """An actor that rejoins its groups when Ray restarts it (test_ray.py's elastic tests):
    `groups` names the create_group groups, `collective` the ray.util.collective ones."""

    def __init__(self, groups=(), collective=()):
        import ray
        self.restarted = ray.get_runtime_context().was_current_actor_reconstructed
        self.rejoining = [actorcc.ray.rejoin_group(g, join_timeout=30) for g in groups]
        self.rejoining += [actorcc.ray.rejoin_collective_group(g, join_timeout=30) for g in collective]

    def state(self):
        return {"pid": os.getpid(), "restarted": self.restarted, "rejoining": self.rejoining}

    def blocked_allreduce(self, name, n=1 << 16):
        """An all_reduce the test's victim never enters: returns the error it ends with."""
        comm = actorcc.ray.get_group(name)
        try:
            comm.all_reduce(np.ones(n, np.float32))
            return None
        except actorcc.Error as e:
            return {"kind": type(e).__name__, "culprit": e.culprit, "msg": str(e)}

    def shrink(self, name, exclude=None):
        comm = actorcc.ray.shrink_group(name, exclude=exclude)
        return comm.rank, comm.world_size, actorcc.ray.group_members(name)

    def grow(self, name, wait=0.0):
        comm = actorcc.ray.grow_group(name, wait=wait)
        return comm.rank, comm.world_size, actorcc.ray.group_members(name)

    def exact_allreduce(self, name, n=4099):
        """float64 all_reduce of inputs named by each member's original rank; True if exact."""
        comm = actorcc.ray.get_group(name)
        members = actorcc.ray.group_members(name)
        x = (members[comm.rank] + 1) * pattern(n)
        comm.all_reduce(x)
        return bool(np.array_equal(x, sum(m + 1 for m in members) * pattern(n))), comm.rank, comm.world_size

    def col_blocked_allreduce(self, name, n=1 << 16):
        import ray.util.collective as col
        try:
            col.allreduce(np.ones(n, np.float32), group_name=name)
            return None
        except actorcc.Error as e:
            return {"kind": type(e).__name__, "culprit": e.culprit, "msg": str(e)}

    def col_shrink_then_grow(self, name, grow=False, wait=0.0):
        import ray.util.collective as col
        if grow:
            actorcc.ray.grow_collective_group(name, wait=wait)
        else:
            actorcc.ray.shrink_collective_group(name)
        return col.get_rank(name), col.get_collective_group_size(name)

    def col_exact_allreduce(self, name, value, n=4099):
        import ray.util.collective as col
        x = value * pattern(n)
        col.allreduce(x, group_name=name)
        return x
