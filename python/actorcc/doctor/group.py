"""Group mode: every rank runs the doctor in its own process over an actorcc communicator.

run(comm) is collective (every rank calls it). It times the first small all-reduce, gathers
each rank's local facts (allgather_bytes of JSON), lets each node's first rank run the VMM
probe, measures all-reduce bandwidth per node (1 MB and 256 MB on GPUs), and evaluates the
local rules on every rank plus the cross-rank rules. Every rank returns the same report.
"""
from __future__ import annotations

import json
import time

from . import facts as facts_mod
from . import nvml as nvml_mod
from . import report, rules

FIRST_BYTES = 4096
JOIN_TIMEOUT_S = 120.0  # the CLI's default wait for every rank (the library's is 600 s)
GPU_SIZES = (1 << 20, 256 << 20)
CPU_SIZES = (1 << 20, 16 << 20)  # host memory on small CI machines: just report


# ---------------------------------------------------------------- binding adapters
def _api():
    """(Communicator, UniqueId) of the actorcc package (needs the built extension)."""
    import actorcc
    return actorcc.Communicator, actorcc.UniqueId


def _get(obj, name, default=None):
    v = getattr(obj, name, default)
    return v() if callable(v) else v


def make_communicator(rank: int, world: int, uid=None, address: str | None = None, join_timeout=None):
    Communicator, UniqueId = _api()
    if address:
        host, _, port = address.rpartition(":")
        return Communicator.from_address(host, int(port), rank, world, join_timeout=join_timeout)
    if isinstance(uid, str):
        uid = UniqueId.parse(uid)
    return Communicator(uid, rank, world, join_timeout=join_timeout)


def create_unique_id():
    return _api()[1].create()


def _backend(comm) -> str:
    b = str(_get(comm, "backend", "")).lower()
    if "cuda" in b or "gpu" in b:
        return "cuda"
    if "cpu" in b:
        return "cpu"
    return "cuda" if (_get(comm, "device", -1) or -1) >= 0 else "cpu"


class _Buffers:
    """float32 buffers the communicator can all-reduce: numpy (CPU) or torch/cupy (GPU)."""

    def __init__(self, backend: str, device: int):
        self.kind, self.device = None, device
        if backend == "cpu":
            import numpy
            self.kind, self.np = "numpy", numpy
            return
        try:
            import torch
            if torch.cuda.is_available():
                self.kind, self.torch = "torch", torch
                torch.cuda.set_device(max(device, 0))
                return
        except ImportError:
            pass
        import cupy  # raises ImportError: the caller records why bandwidth was skipped
        self.kind, self.cp = "cupy", cupy

    def make(self, nbytes: int):
        n = nbytes // 4
        if self.kind == "numpy":
            return self.np.ones(n, dtype=self.np.float32)
        if self.kind == "torch":
            return self.torch.ones(n, dtype=self.torch.float32, device="cuda")
        return self.cp.ones(n, dtype=self.cp.float32)

    def sync(self):
        if self.kind == "torch":
            self.torch.cuda.synchronize()
        elif self.kind == "cupy":
            self.cp.cuda.Device().synchronize()


def _close(comm):
    close = getattr(comm, "close", None)
    if callable(close):
        close()


def _all_reduce(comm, buf):
    comm.all_reduce(buf)


def _allgather_json(comm, obj) -> list:
    blobs = comm.allgather_bytes(json.dumps(obj).encode())
    return [json.loads(bytes(b).decode()) for b in blobs]


# ---------------------------------------------------------------- measurements
def _time_all_reduce(comm, bufs, nbytes: int, iters: int) -> float:
    x = bufs.make(nbytes)
    _all_reduce(comm, x)  # warm-up (and registration, if any)
    bufs.sync()
    _all_reduce(comm, bufs.make(FIRST_BYTES))  # line the ranks up before the clock starts
    bufs.sync()
    t0 = time.perf_counter()
    for _ in range(iters):
        _all_reduce(comm, x)
    bufs.sync()
    return (time.perf_counter() - t0) / iters


def _node_comm(comm, nodes, me):
    """A communicator over the ranks of this rank's node: `comm` itself when the group is one
    node, None when this node has a single rank (nothing to measure)."""
    if len(nodes) == 1:
        return comm
    node = nodes[me["node"]]
    lead = me["local_rank"] == 0 and len(node["ranks"]) > 1
    uids = _allgather_json(comm, str(create_unique_id()) if lead else "")
    if len(node["ranks"]) < 2:
        return None
    return make_communicator(me["local_rank"], len(node["ranks"]), uid=uids[node["ranks"][0]])


def _bandwidth(comm, bufs, sizes, nodes, me) -> list[dict]:
    out = []
    node = nodes[me["node"]]
    sub = _node_comm(comm, nodes, me)
    scope = f"node {me['node']} {node['hostname']} ({len(node['ranks'])} ranks)"
    for nbytes in sizes if sub is not None else ():
        t = _time_all_reduce(sub, bufs, nbytes, max(2, min(20, (64 << 20) // nbytes * 2)))
        out.append({"scope": scope, "node": me["node"], "bytes": nbytes, "time_s": t, "n": len(node["ranks"])})
    if sub is not None and sub is not comm:
        _close(sub)
    if len(nodes) > 1:
        nbytes, world = sizes[-1], len(me["_world"])
        t = _time_all_reduce(comm, bufs, nbytes, max(2, min(20, (64 << 20) // nbytes * 2)))
        out.append({"scope": f"all {world} ranks, {len(nodes)} nodes", "node": None, "bytes": nbytes,
                    "time_s": t, "n": world})
    return out


def _summarize_bandwidth(per_rank: list[list[dict]], ranks: list[dict], nodes) -> list[dict]:
    """Slowest rank's time per (scope, size); busbw = bytes/t * 2(n-1)/n; expected from NVLinks."""
    merged = {}
    for lst in per_rank:
        for b in lst or []:
            key = (b["scope"], b["bytes"])
            if key not in merged or b["time_s"] > merged[key]["time_s"]:
                merged[key] = dict(b)
    out = []
    for b in merged.values():
        n = b.pop("n")
        if n < 2:
            continue
        b["algbw_gbs"] = b["bytes"] / b["time_s"] / 1e9
        b["busbw_gbs"] = b["algbw_gbs"] * 2 * (n - 1) / n
        members = nodes[b["node"]]["ranks"] if b["node"] is not None else [f["rank"] for f in ranks]
        links = [_nvlinks(ranks[r]) for r in members]
        if b["node"] is not None and links and all(links):
            b["expected_busbw_gbs"] = min(links) * nvml_mod.NVLINK_GBPS_PER_LINK
        out.append(b)
    return sorted(out, key=lambda b: (b["scope"], b["bytes"]))


def _nvlinks(f) -> int:
    g = f.get("gpu")
    if not g:
        return 0
    return next((x["nvlinks_active"] for x in f["nvml"]["gpus"] if x["index"] == g["index"]), 0)


# ---------------------------------------------------------------- the collective doctor
def mark_one_gpu_views(ranks: list[dict], nodes: list[dict]) -> None:
    """A rank that sees one GPU while other ranks share its node is masked for NCCL's purposes,
    even when CUDA_VISIBLE_DEVICES is unset (a container that exposes one GPU)."""
    for f in ranks:
        v = f["visible"]
        if not v.get("masked") and len(v.get("physical") or []) == 1 and len(nodes[f["node"]]["ranks"]) > 1:
            v["masked"], v["masked_by"] = True, "the host exposes one GPU to it (container?)"
            v["host_gpus"] = max(v.get("host_gpus") or 0, len(nodes[f["node"]]["ranks"]))


def assign_nodes(ranks: list[dict]) -> list[dict]:
    """Groups ranks by host id (in rank order); sets each rank's "node" and "local_rank"."""
    nodes = []
    for f in ranks:
        node = next((n for n in nodes if n["host_id"] == f["host"]["host_id"]), None)
        if node is None:
            node = {"host_id": f["host"]["host_id"], "hostname": f["host"]["hostname"], "ranks": []}
            nodes.append(node)
        f["node"], f["local_rank"] = nodes.index(node), len(node["ranks"])
        node["ranks"].append(f["rank"])
    return nodes


def collect(comm, bandwidth: bool = True, sizes=None, vmm: bool = True, torch_mode: str = "if-loaded") -> dict:
    """Gathers the group facts (identical on every rank)."""
    rank, world = int(_get(comm, "rank")), int(_get(comm, "world_size"))
    backend = _backend(comm)
    device = _get(comm, "device", -1)
    device = -1 if device is None else int(device)
    meas, bufs, first, first_error = {"first_collective_s": [], "bandwidth": []}, None, None, None
    try:
        bufs = _Buffers(backend, device)
    except ImportError as e:
        why = f"no array library for {backend} buffers on rank {rank} ({e})"
    else:
        why = ""
    # Host-side agreement (also lines the ranks up): device collectives run only if every rank can.
    whys = [w for w in _allgather_json(comm, why) if w]
    if whys:
        bufs, meas["bandwidth_skipped"] = None, whys[0]
    else:
        try:
            small = bufs.make(FIRST_BYTES)
            t0 = time.perf_counter()
            _all_reduce(comm, small)
            bufs.sync()
            first = time.perf_counter() - t0
        except Exception as e:  # noqa: BLE001 - a failing collective is the finding
            bufs, first_error = None, f"{type(e).__name__}: {e}"
            meas["bandwidth_skipped"] = "the first all-reduce failed"

    mine = facts_mod.collect_local(vmm=False, torch_mode=torch_mode)
    mine["rank"] = rank
    mine["gpu"] = facts_mod.current_gpu(mine, device if backend == "cuda" else None)
    ranks = _allgather_json(comm, mine)
    nodes = assign_nodes(ranks)
    mark_one_gpu_views(ranks, nodes)
    me = dict(ranks[rank], _world=ranks)

    vmm_result = None
    if vmm and me["local_rank"] == 0:
        gpus = mine["nvml"]["gpus"] if mine["nvml"]["available"] else []
        vmm_result = facts_mod.vmm_facts(mine["visible"], gpus)

    bw, skipped = [], None
    if bandwidth and bufs is not None and "bandwidth_skipped" not in meas:
        try:
            bw = _bandwidth(comm, bufs, tuple(sizes or (GPU_SIZES if backend == "cuda" else CPU_SIZES)),
                            nodes, me)
        except Exception as e:  # noqa: BLE001 - a failed probe is a finding, not a crash
            skipped = f"{type(e).__name__}: {e}"
    elif not bandwidth:
        skipped = "--no-bandwidth"

    late = _allgather_json(comm, {"vmm": vmm_result, "first": first, "bw": bw, "skipped": skipped,
                                  "first_error": first_error})
    for f in ranks:
        leader = nodes[f["node"]]["ranks"][0]
        f["vmm"] = late[leader]["vmm"] or {"status": "not-run", "detail": "--no-vmm"}
    meas["first_collective_s"] = [d["first"] for d in late if d["first"] is not None]
    meas["collective_errors"] = {str(r): d["first_error"] for r, d in enumerate(late) if d["first_error"]}
    meas["bandwidth"] = _summarize_bandwidth([d["bw"] for d in late], ranks, nodes)
    why = next((d["skipped"] for d in late if d["skipped"]), None)
    if why and "bandwidth_skipped" not in meas:
        meas["bandwidth_skipped"] = why
    return {"mode": "group", "world": world, "backend": backend, "ranks": ranks, "nodes": nodes,
            "measure": meas}


def run(comm, **kw) -> dict:
    """The report (dict) of the group; collective: every rank must call it."""
    group = collect(comm, **kw)
    return report.build("group", rules.evaluate_group(group), group)


def run_cli(rank: int, world: int, uid=None, address: str | None = None, join_timeout: float = JOIN_TIMEOUT_S,
            **kw) -> dict:
    """The command line's group mode: joins, then run(). A group that does not form (a rank
    missing after join_timeout, a bad id) is itself the finding: this rank's local report
    with the join error first (rule group-join-failed), not a traceback."""
    import actorcc
    try:
        comm = make_communicator(rank, world, uid=uid, address=address, join_timeout=join_timeout)
    except actorcc.Error as e:
        f = facts_mod.collect_local(vmm=kw.get("vmm", True), torch_mode=kw.get("torch_mode", "if-loaded"))
        f["group_join"] = {"rank": rank, "world": world, "join_timeout_s": join_timeout,
                           "error": f"{type(e).__name__}: {e}"}
        return report.build("local", rules.evaluate_local(f), f)
    try:
        return run(comm, **kw)
    finally:
        _close(comm)
