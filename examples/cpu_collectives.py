#!/usr/bin/env python3
"""Every collective on the CPU backend, in several processes: runs in seconds, no GPU needed.

    python examples/cpu_collectives.py              # 4 processes
    python examples/cpu_collectives.py --world 3

The parent creates the group's UniqueId (the group's root then runs in the parent, which
stays up for the group's whole life) and starts one process per rank, a little apart, as
actors arrive. Each rank joins, runs all_reduce (sum, max), reduce_scatter, all_gather,
broadcast and barrier on fresh random inputs, checks every result against numpy and prints
one line. The same code runs on GPUs with CUDA tensors (torch, cupy) and backend="auto".
"""
import argparse
import multiprocessing as mp
import sys
import time

import numpy as np


def inputs(rank, n, seed):
    """Rank `rank`'s input: small integers, so float32 sums are exact on every rank."""
    return np.random.default_rng([seed, rank]).integers(-100, 100, n).astype(np.float32)


def rank_main(rank, world, uid, seed, stagger):
    import actorcc

    time.sleep(rank * stagger)  # ranks arrive one by one; the join waits for all of them
    n = 1000 * world + 7 * world  # an odd block size: 1007 per rank
    everyone = [inputs(r, n, seed) for r in range(world)]  # to check against
    with actorcc.Communicator(uid, rank, world, backend="cpu", timeout=60) as comm:
        x = inputs(rank, n, seed)
        comm.all_reduce(x)                                   # in place, op="sum"
        assert np.array_equal(x, np.sum(everyone, axis=0))

        m = comm.all_reduce(inputs(rank, n, seed), op="max")
        assert np.array_equal(m, np.max(everyone, axis=0))

        block = comm.reduce_scatter(inputs(rank, n, seed))   # rank r gets block r of the sum
        k = n // world
        assert np.array_equal(block, np.sum(everyone, axis=0)[rank * k:(rank + 1) * k])

        g = comm.all_gather(inputs(rank, n, seed))           # every rank's input, rank order
        assert np.array_equal(g, np.concatenate(everyone))

        b = inputs(rank, n, seed)
        comm.broadcast(b, root=world - 1)                    # the last rank's input everywhere
        assert np.array_equal(b, everyone[world - 1])

        comm.barrier()
        # One write per line: print() writes the text and its newline separately, and the
        # ranks share one stdout, so their lines could run together.
        sys.stdout.write(f"rank {rank}/{world} (pid {mp.current_process().pid}): all_reduce sum and max, "
                         f"reduce_scatter, all_gather, broadcast, barrier: results checked\n")
        sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, default=4, help="number of processes (default 4)")
    ap.add_argument("--stagger", type=float, default=0.2, help="seconds between rank starts (default 0.2)")
    args = ap.parse_args()

    import actorcc

    uid = actorcc.UniqueId.create("127.0.0.1")  # this process hosts the root: keep it up
    seed = int(time.time())
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=rank_main, args=(r, args.world, uid, seed, args.stagger)) for r in range(args.world)]
    t0 = time.monotonic()
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    bad = [r for r, p in enumerate(procs) if p.exitcode != 0]
    if bad:
        print(f"FAILED on rank(s) {bad}", file=sys.stderr)
        return 1
    print(f"{args.world} ranks, every collective checked, in {time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
