"""Two of today's NCCL clients on actorcc's libnccl.so.2, as cases of nccl_abi_workers.py's
launcher (`--case nccl4py`, `--case jax`; the library preloaded, ranks sharing GPU 0):

- nccl4py 0.6.0 (NeMo-RL's refit path, built against NCCL 2.32.3): a communicator made with
  `config=`, its `.properties`, the 2.31 per-call-config collectives (`config=NCCLCollConfig`),
  the parameter table (`nccl.core.params`), suspend/resume with the memory statistics;
- JAX's CUDA plugin (which dlopens libnccl.so.2): a two-process `psum` and `all_gather`.

Each check compares against a float64 reference of every rank's inputs (`inputs` there)."""
import os


def _our_library(path, ck, what):
    ck.n += 1
    want = os.path.realpath(os.environ.get("ACTORCC_NCCL_ABI_LIB", ""))
    if not path or os.path.realpath(str(path)) != want:
        ck.fails.append(f"{what}: the libnccl in use is {path}, not the library under test {want}")


def nccl4py_client(rank, world, ck, inputs, store):
    import nccl.core as nccl
    import torch
    info = nccl.get_version()
    _our_library(info.libnccl.path if info.libnccl else None, ck, "nccl4py")
    print(f"NCCL4PY versions: {info}", flush=True)
    if rank == 0:
        store.set("uid4py", bytes(nccl.get_unique_id()))
    uid = nccl.UniqueId.from_bytes(store.get("uid4py"))
    comm = nccl.Communicator.init(world, rank, uid, config=nccl.NCCLConfig(blocking=True, comm_name="nccl4py-check"))
    p = comm.properties
    ck.n += 1
    if (p.rank, p.n_ranks, p.cuda_dev) != (rank, world, 0) or p.device_api_support or p.multimem_support:
        ck.fails.append(f"properties: {p}")
    print(f"NCCL4PY properties rank {rank}: {p}", flush=True)
    dev = torch.device("cuda", 0)
    stream = torch.cuda.current_stream().cuda_stream
    n = 4099
    coll = nccl.NCCLCollConfig(min_ctas=1, max_ctas=4)
    for dtype in (torch.float32, torch.bfloat16, torch.int32):
        xs = inputs(dtype, n, rank, 1200 + dtype.itemsize, world)
        x, y = xs[rank].to(dev), torch.full((n,), -7, dtype=dtype, device=dev)
        for cfg in (None, coll):
            y.fill_(-7)
            comm.allreduce(x, y, nccl.SUM, stream=stream, config=cfg)
            torch.cuda.synchronize()
            ck.eq(f"nccl4py allreduce {dtype} config={cfg is not None}", y, sum(xs).to(dtype))
        g = torch.empty(world * n, dtype=dtype, device=dev)
        comm.allgather(x, g, stream=stream, config=coll)
        torch.cuda.synchronize()
        ck.eq(f"nccl4py allgather {dtype} config", g, torch.cat(xs))
        b = torch.empty(n, dtype=dtype, device=dev)
        comm.broadcast(x, b, root=world - 1, stream=stream, config=coll)
        torch.cuda.synchronize()
        ck.eq(f"nccl4py broadcast {dtype} config", b, xs[world - 1])
    # the parameter table: listed, and every listed name reads back
    keys = list(nccl.params)
    ck.n += 1
    if not keys:
        ck.fails.append("nccl.core.params lists no parameter")
    for k in keys[:8]:
        nccl.params[k]
    print(f"NCCL4PY params: {len(keys)} listed, first {keys[:4]}", flush=True)
    # suspend gives the memory back, resume serves the next call exactly
    stat = nccl.NcclCommMemStat
    held = comm.get_mem_stat(stat.GPU_MEM_SUSPEND)
    comm.suspend()
    suspended = (comm.get_mem_stat(stat.GPU_MEM_SUSPEND), comm.get_mem_stat(stat.GPU_MEM_SUSPENDED))
    comm.resume()
    xs = inputs(torch.float32, n, rank, 1300, world)
    y = torch.empty(n, device=dev)
    comm.allreduce(xs[rank].to(dev), y, nccl.SUM, stream=stream)
    torch.cuda.synchronize()
    ck.eq("nccl4py allreduce after suspend/resume", y, sum(xs).float())
    print(f"NCCL4PY mem stat: suspendable {held} bytes; suspended (bytes, flag) {suspended}", flush=True)
    ck.n += 1
    if not (held > 0 and suspended == (0, 1)):
        ck.fails.append(f"suspend: suspendable bytes {held}, then (bytes, flag) {suspended}")
    store.set(f"n4p-done{rank}", "1")
    store.wait([f"n4p-done{r}" for r in range(world)])
    comm.destroy()


def jax_client(rank, world, ck, inputs, store):
    # two processes on one GPU: neither may take most of its memory up front
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{os.environ['NCCLABI_PORT2_R0']}",
                               num_processes=world, process_id=rank, local_device_ids=[0])
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import multihost_utils
    import torch
    ck.n += 1
    if jax.process_count() != world or jax.device_count() != world:
        ck.fails.append(f"jax sees {jax.process_count()} processes and {jax.device_count()} devices")
    n = 4099
    for dtype, jdt in ((torch.float32, jnp.float32), (torch.int32, jnp.int32)):
        xs = inputs(dtype, n, rank, 1400 + dtype.itemsize, world)
        mine = jnp.asarray(xs[rank].numpy(), dtype=jdt)[None]
        summed = jax.pmap(lambda v: jax.lax.psum(v, "i"), axis_name="i")(mine)
        ck.eq(f"jax psum {dtype}", torch.from_numpy(np.asarray(summed[0])), sum(xs).to(dtype))
        got = multihost_utils.process_allgather(jnp.asarray(xs[rank].numpy(), dtype=jdt))
        ck.eq(f"jax process_allgather {dtype}", torch.from_numpy(np.asarray(got)).reshape(-1), torch.cat(xs))
    # Two ranks on one GPU: NVIDIA's NCCL refuses that (duplicate GPU), so the psum above ran
    # on the library under test; the mapped copies are printed for the record.
    mapped = sorted({line.split()[-1] for line in open("/proc/self/maps").read().splitlines()
                     if "libnccl" in line.split()[-1]})
    print(f"JAX libnccl mapped: {mapped}", flush=True)
    store.set(f"jax-done{rank}", "1")
    store.wait([f"jax-done{r}" for r in range(world)])
    jax.distributed.shutdown()
