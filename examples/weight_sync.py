#!/usr/bin/env python3
"""Weight sync from a trainer group to an inference group, as RL stacks do it, over
torch.distributed with backend "actorcc" (CPU here; CUDA tensors with --device cuda).

    python examples/weight_sync.py                 # 2 trainers + 2 inference ranks
    python examples/weight_sync.py --trainers 2 --inference 3 --device cuda

One process per rank, all in one torch.distributed world, with three groups living side by
side in the same processes: the trainers' group (their gradient all-reduce), the inference
group (its own calls), and the sync group (trainer 0 and every inference rank). After each
training step trainer 0 packs the model's tensors into buckets (many tensors per call) and
broadcasts them over the sync group; trainer 1 (where there is one) also sends its copy to
the last inference rank point to point, all tensors in one batch_isend_irecv. Each inference
rank checks that its weights equal the trainers' exactly, bit for bit; each rank reports one line.
"""
import argparse
import multiprocessing as mp
import sys
from concurrent.futures import ProcessPoolExecutor

BUCKET_BYTES = 8 << 10  # small on purpose: the model's tensors span several buckets


def make_model(torch, seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                               torch.nn.ReLU(), torch.nn.Linear(64, 8))


def buckets(tensors, limit):
    """Consecutive tensors grouped so that each group holds at most `limit` bytes (or one tensor)."""
    group, size = [], 0
    for t in tensors:
        if group and size + t.numel() * t.element_size() > limit:
            yield group
            group, size = [], 0
        group.append(t)
        size += t.numel() * t.element_size()
    if group:
        yield group


def broadcast_weights(torch, dist, params, src, group):
    """Every parameter from global rank `src` to the group, one flat buffer per bucket."""
    for bucket in buckets(params, BUCKET_BYTES):
        flat = torch.cat([p.data.reshape(-1) for p in bucket])
        dist.broadcast(flat, src=src, group=group)
        at = 0
        for p in bucket:
            p.data.copy_(flat[at:at + p.numel()].view_as(p))
            at += p.numel()


def rank_main(rank, world, trainers, port, device, steps):
    import torch
    import torch.distributed as dist

    import actorcc.torch  # noqa: F401  registers the "actorcc" backend

    if device == "cuda":
        torch.cuda.set_device(0)  # each actor sees its own GPU as device 0
    dist.init_process_group("actorcc", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    # Every rank creates every group, in the same order (torch's rule for new_group).
    trainer_group = dist.new_group(list(range(trainers)))
    inference_group = dist.new_group(list(range(trainers, world)))
    sync_group = dist.new_group([0] + list(range(trainers, world)))
    # A group's communicator forms on its first call, which every rank of the group must make
    # (as with NCCL): the world's, used below by two ranks at a time, forms here.
    dist.all_reduce(torch.zeros(1, device=device))
    is_trainer = rank < trainers
    # Inference ranks start from other weights: only the sync makes them equal.
    model = make_model(torch, 0 if is_trainer else 1000 + rank).to(device)
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=0.05)
    last = world - 1
    for step in range(steps):
        if is_trainer:
            g = torch.Generator().manual_seed(step * 100 + rank)  # each trainer its own shard
            x, y = torch.randn(16, 32, generator=g).to(device), torch.randn(16, 8, generator=g).to(device)
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            for p in params:  # data parallel: the trainers average their gradients
                dist.all_reduce(p.grad, group=trainer_group)
                p.grad /= trainers
            opt.step()
        else:  # the inference group's own traffic, between the syncs
            load = torch.tensor([float(rank)], device=device)
            dist.all_reduce(load, group=inference_group)
        if rank == 0 or not is_trainer:
            broadcast_weights(torch, dist, params, 0, sync_group)
        if trainers > 1 and rank in (1, last):  # the same weights again, point to point, one batch
            copies = params if rank == 1 else [torch.full_like(p, float("nan")) for p in params]
            op = dist.isend if rank == 1 else dist.irecv
            for w in dist.batch_isend_irecv([dist.P2POp(op, t, last if rank == 1 else 1) for t in copies]):
                w.wait()
            if rank == last and not all(torch.equal(c, p) for c, p in zip(copies, params)):
                raise AssertionError(f"rank {rank}: the point-to-point copy differs from the broadcast one")
    # Everyone compares its weights with trainer 0's, bit for bit.
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    mine = flat.view(torch.int32).to(torch.int64).sum().reshape(1)  # a checksum of the bits
    sums = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(world)]
    dist.all_gather(sums, mine)
    if any(int(s) != int(sums[0]) for s in sums):
        raise AssertionError(f"rank {rank}: weights differ after the sync: checksums {[int(s) for s in sums]}")
    role = "trainer" if is_trainer else "inference"
    dist.destroy_process_group()
    return (f"rank {rank} ({role}): {steps} steps, {sum(1 for _ in buckets(params, BUCKET_BYTES))} buckets per sync, "
            f"weights equal to the trainers'")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trainers", type=int, default=2)
    ap.add_argument("--inference", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = ap.parse_args()
    import socket
    with socket.socket() as s:  # a free port for torch's TCP store
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    world = args.trainers + args.inference
    # One process per rank; a failed rank's exception comes back through its future.
    with ProcessPoolExecutor(world, mp_context=mp.get_context("spawn")) as pool:
        futures = [pool.submit(rank_main, r, world, args.trainers, port, args.device, args.steps)
                   for r in range(world)]
        failed = []
        for r, f in enumerate(futures):
            try:
                print(f.result(timeout=300))
            except Exception as e:  # noqa: BLE001  reported, then the run fails
                failed.append(f"rank {r}: {type(e).__name__}: {e}")
    if failed:
        print("FAILED\n" + "\n".join(failed), file=sys.stderr)
        return 1
    print(f"{args.trainers} trainers -> {args.inference} inference ranks: weights synced and checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
