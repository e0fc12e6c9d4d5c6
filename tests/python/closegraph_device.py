"""Device check (scripts/device.sh closegraph): close() and process exit with a CUDA graph
alive that captured actorcc collectives, on GPU groups across virtual nodes (ACTORCC_NODE_ID +
NCCL_HOSTID), every rank sharing GPU 0. Before, both ranks blocked forever in
close() (ncclCommDestroy waits for every graph that captured the communicator).

Each shape (nodes x ranks per node: 2x1, 2x2) runs twice: "close" (capture all_reduce in a
torch.cuda.CUDAGraph, replay 200 times, check the result, close() with the graph alive, then
exit with it alive) and "exit" (the same without close(): the process exits with both alive).
PASS when every rank exits 0 within --timeout, with a right result, and close() returned
within 20 s. One line per case: CLOSEGRAPH <shape> <mode>: PASS|FAIL (...)."""
import argparse
import json
import os
import subprocess
import sys
import time

RANK = r"""
import json, sys, time
import torch
import actorcc
uid, rank, world, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
c = actorcc.Communicator(uid, rank, world, device=0, timeout=20, join_timeout=60)
n = (1 << 20) + 3
x = torch.full((n,), float(rank + 1), device="cuda")
y = torch.empty_like(x)
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    c.all_reduce(x, out=y)  # warm-up outside the capture
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g, stream=s):
    c.all_reduce(x, out=y)
for _ in range(200):
    g.replay()
torch.cuda.synchronize()
ok = bool((y == world * (world + 1) / 2).all().item())
close_s = None
if mode == "close":
    t0 = time.monotonic()
    c.close()
    close_s = time.monotonic() - t0
print("RESULT " + json.dumps({"rank": rank, "ok": ok, "close_s": close_s}), flush=True)
# exit with the graph (and, in "exit" mode, the communicator) alive
"""


def run_case(nodes, per_node, mode, timeout):
    import actorcc
    world = nodes * per_node
    uid = str(actorcc.UniqueId.create("127.0.0.1"))
    procs = []
    t0 = time.monotonic()
    for r in range(world):
        node = f"n{r // per_node}"
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="0", ACTORCC_CUDA_SHARE_GPU="1", ACTORCC_NODE_ID=node,
                   NCCL_HOSTID=node, NCCL_NVLS_ENABLE="0")
        procs.append(subprocess.Popen([sys.executable, "-c", RANK, uid, str(r), str(world), mode],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env))
    bad, close_times = [], []
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=max(1, timeout - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            bad.append(f"rank {r} still running at {timeout} s")
            continue
        res = [json.loads(l[7:]) for l in out.splitlines() if l.startswith("RESULT ")]
        if p.returncode != 0 or not res:
            bad.append(f"rank {r} exit {p.returncode}: {out.strip()[-400:]}")
        elif not res[0]["ok"]:
            bad.append(f"rank {r}: wrong result")
        elif mode == "close":
            close_times.append(res[0]["close_s"])
            if res[0]["close_s"] > 20:
                bad.append(f"rank {r}: close() took {res[0]['close_s']:.1f} s")
    took = time.monotonic() - t0
    verdict = "PASS" if not bad else "FAIL"
    closed = f", slowest close() {max(close_times):.2f} s" if close_times else ""
    print(f"CLOSEGRAPH {nodes}x{per_node} {mode}: {verdict} ({took:.1f} s{closed}){'; ' + '; '.join(bad) if bad else ''}",
          flush=True)
    return not bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--timeout", type=float, default=90)
    args = ap.parse_args()
    ok = True
    for nodes, per_node in ((2, 1), (2, 2)):
        for mode in ("close", "exit"):
            ok = run_case(nodes, per_node, mode, args.timeout) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
