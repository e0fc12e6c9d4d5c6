"""Copy-engine rates between two masked processes (one GPU each), the question behind a
copy-engine data path: BASELINES.md has the copy engine at 375-396 GB/s peer to local for one
process alone, above the 365 GB/s both SM-push directions reach at once. This measures both
processes at once (pull, push), one process alone, chunked copies, and a pull beside a local
SM kernel that reads 2 and writes 1 buffer of the same size (what a fold would add).

usage (device machine): python3 tests/gpu/probes/ce_rate.py      (spawns ranks 0 and 1)
Prints one line per case and rank: GB/s per direction.
"""
import multiprocessing as mp
import os
import sys

MB = 1 << 20


def worker(rank, q_out, q_in, bar):
    os.environ["CUDA_VISIBLE_DEVICES"] = str(rank)
    import cupy as cp

    rt = cp.cuda.runtime
    big = 256 * MB
    local = cp.zeros(big // 4, dtype=cp.float32)
    mine = cp.ones(big // 4, dtype=cp.float32)
    q_out.put(rt.ipcGetMemHandle(mine.data.ptr))
    peer = rt.ipcOpenMemHandle(q_in.get(), rt.cudaIpcMemLazyEnablePeerAccess)
    s = cp.cuda.Stream(non_blocking=True)
    s2 = cp.cuda.Stream(non_blocking=True)
    copy16 = cp.RawKernel(r"""
    extern "C" __global__ void copy16(uint4* __restrict__ d, const uint4* __restrict__ s, size_t n) {
      for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) d[i] = s[i];
    }""", "copy16")
    fold = cp.RawKernel(r"""
    extern "C" __global__ void fold(float4* __restrict__ o, const float4* __restrict__ a, const float4* __restrict__ b, size_t n) {
      for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float4 x = a[i], y = b[i]; o[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w); }
    }""", "fold")
    tmp_a = cp.ones(big // 4, dtype=cp.float32)
    tmp_o = cp.zeros(big // 4, dtype=cp.float32)
    D2D = rt.memcpyDeviceToDevice

    def timed(name, body, nbytes, reps, active=True, side=None):
        for _ in range(2):
            if active:
                body()
            if side is not None:  # also compiles a RawKernel before the timed window
                with s2:
                    side()
        s.synchronize()
        s2.synchronize()
        bar.wait()
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record(s)
        if side is not None:
            with s2:
                side()
        for _ in range(reps):
            if active:
                body()
        e1.record(s)
        e1.synchronize()
        s2.synchronize()
        ms = cp.cuda.get_elapsed_time(e0, e1)
        if active:
            print(f"{name:42s} rank {rank}: {reps * nbytes / ms / 1e6:7.1f} GB/s ({ms * 1e3 / reps:8.1f} us per copy)",
                  flush=True)
        bar.wait()

    def pull(n, chunks=1):
        step = n // chunks
        for k in range(chunks):
            rt.memcpyAsync(local.data.ptr + k * step, peer + k * step, step, D2D, s.ptr)

    def push(n):
        rt.memcpyAsync(peer, local.data.ptr, n, D2D, s.ptr)

    def sm_push(n):
        copy16((132,), (512,), (cp.uint64(peer), local, cp.uint64(n // 16)), stream=s)

    def push_split(n, ce_share):  # the copy engine pushes the first part, an SM kernel the rest
        k = int(n * ce_share) // 16 * 16
        rt.memcpyAsync(peer, local.data.ptr, k, D2D, s.ptr)
        copy16((132,), (512,), (cp.uint64(peer + k), cp.uint64(local.data.ptr + k), cp.uint64((n - k) // 16)),
               stream=s2)
        ev = cp.cuda.Event()
        ev.record(s2)
        s.wait_event(ev)

    def local_fold(n):
        fold((132,), (512,), (tmp_o, tmp_a, local, cp.uint64(n // 16)), stream=s2)

    timed("both pull 256 MiB (copy engine)", lambda: pull(big), big, 10)
    timed("both push 256 MiB (copy engine)", lambda: push(big), big, 10)
    timed("both push 256 MiB (SM kernel 132x512)", lambda: sm_push(big), big, 10)
    timed("rank 0 alone pulls 256 MiB (copy engine)", lambda: pull(big), big, 10, active=rank == 0)
    timed("both pull 64 MiB (copy engine)", lambda: pull(64 * MB), 64 * MB, 20)
    timed("both pull 16 MiB (copy engine)", lambda: pull(16 * MB), 16 * MB, 50)
    timed("both pull 4 MiB (copy engine)", lambda: pull(4 * MB), 4 * MB, 100)
    timed("both pull 64 MiB as 16 x 4 MiB copies", lambda: pull(64 * MB, 16), 64 * MB, 20)
    timed("both pull 64 MiB as 64 x 1 MiB copies", lambda: pull(64 * MB, 64), 64 * MB, 20)
    timed("both push 64 MiB (copy engine)", lambda: push(64 * MB), 64 * MB, 20)
    timed("both push 16 MiB (copy engine)", lambda: push(16 * MB), 16 * MB, 50)
    timed("both push 256 MiB: 70% copy engine + 30% SM", lambda: push_split(big, 0.7), big, 10)
    timed("both push 256 MiB: 50% copy engine + 50% SM", lambda: push_split(big, 0.5), big, 10)
    timed("both push 64 MiB: 70% copy engine + 30% SM", lambda: push_split(64 * MB, 0.7), 64 * MB, 20)
    timed("both pull 256 MiB beside 8 local 256 MiB folds", lambda: pull(big), big, 4,
          side=lambda: [local_fold(big) for _ in range(8)])
    timed("both push 256 MiB beside 8 local 256 MiB folds", lambda: push(big), big, 4,
          side=lambda: [local_fold(big) for _ in range(8)])
    rt.ipcCloseMemHandle(peer)


def main():
    ctx = mp.get_context("spawn")
    q01, q10 = ctx.Queue(), ctx.Queue()
    bar = ctx.Barrier(2)
    ps = [ctx.Process(target=worker, args=(0, q01, q10, bar)), ctx.Process(target=worker, args=(1, q10, q01, bar))]
    for p in ps:
        p.start()
    for p in ps:
        p.join(240)
    sys.exit(max(p.exitcode or 0 for p in ps))


if __name__ == "__main__":
    main()
