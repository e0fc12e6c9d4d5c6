"""Every diagnosis the doctor makes, in one table (RULES at the bottom).

A Rule has an id, a severity (error / warn / info), a title, sources (the known issue it
matches), the fix, and check(facts). check returns None when the rule stays silent, else the
evidence as a string, or a dict {"evidence": ..., "severity": ..., "ranks": [...]} when the
evidence decides the severity or names ranks. Rule.run(facts) -> Finding | None wraps it.

Local rules (scope "local") see one process's facts (facts.collect_local()); group rules
(scope "group") see {"ranks": [facts of each rank], "nodes": [...], "measure": {...}}
(group.py). To add a rule: write a check function and append a Rule to RULES.
Version ranges are the versions an issue was *reported with*; where no fixed release is
known, a rule fires for every later version too.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable

from .fact_views import (algo_allows, cumem_on, cvd_text, nccl_text, nccl_version, nenv, nvlink_node,
                         nvls_possible, truthy)

SEVERITY_ORDER = {"error": 0, "warn": 1, "info": 2}

NCCL_ENV_DOC = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
CUDA_ENV_DOC = "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#cuda-environment-variables"
FABRIC_DOC = "https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html"
NCCL_ISSUE = "https://github.com/NVIDIA/nccl/issues/"


@dataclass
class Finding:
    rule: str
    severity: str
    title: str
    evidence: str
    fix: str
    sources: list[str]
    ranks: list[int] | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str
    title: str
    sources: tuple[str, ...]
    fix: str
    check: Callable[[dict], object] = field(repr=False)
    scope: str = "local"

    def run(self, facts: dict) -> Finding | None:
        got = self.check(facts)
        if not got:
            return None
        if isinstance(got, str):
            got = {"evidence": got}
        return Finding(self.id, got.get("severity", self.severity), self.title, got["evidence"],
                       got.get("fix", self.fix), list(self.sources), got.get("ranks"))


# ---------------------------------------------------------------- local checks
def check_cumem_masked(f):
    ver = nccl_version(f)
    if not f["visible"].get("masked") or ver is None or not cumem_on(f):
        return None
    setting = nenv(f, "NCCL_CUMEM_ENABLE")
    why = f"NCCL_CUMEM_ENABLE={setting}" if setting is not None else "NCCL_CUMEM_ENABLE unset (on by default since 2.19)"
    return (f"{cvd_text(f)}; {nccl_text(f)}; {why}. With cuMem on, NCCL imports each peer's memory "
            "through cuMem handles, and in processes that see only their own GPU this was reported to "
            "make the first collective take seconds (#1749, NCCL 2.27.3 in Ray workers; the actorcc "
            "project measured 187 ms vs 8.8 ms with NCCL_CUMEM_ENABLE=0 on 2 x H200, NCCL 2.28.9) "
            "and to fail with "
            "'transport/p2p.cc:275 Cuda failure 101 invalid device ordinal' (#1948, NCCL 2.28.9; "
            "#1647, cuMemImportFromShareableHandle failing with 101, NCCL 2.26.2). No NCCL release "
            "is known to fix it.")


def check_nvls_permuted(f):
    v, ver = f["visible"], nccl_version(f)
    if not v.get("permuted") or len(v["physical"]) < 2 or ver is None or ver <= (2, 21, 5):
        return None
    if not nvls_possible(f):
        return None
    return (f"{cvd_text(f)} is not in ascending physical order; NVSwitch present and NVLS not "
            f"disabled (NCCL_NVLS_ENABLE={nenv(f, 'NCCL_NVLS_ENABLE')}, NCCL_ALGO={nenv(f, 'NCCL_ALGO')}); "
            f"{nccl_text(f)}. Single-node NVLS all-gather (and reduce-scatter) put the ranks' "
            "chunks in the wrong places with permuted devices: silent wrong data (#1906, reported "
            "with 2.26.2, 2.21.5 was fine; fix proposed in PR #2377, in no release known here).")


def check_ring_hang(f):
    if not f["visible"].get("masked") or not nvlink_node(f) or nccl_version(f) is None:
        return None
    algo = nenv(f, "NCCL_ALGO")
    if not algo_allows(algo, "ring", "allreduce"):
        return None
    kind = "NVSwitch" if f["nvml"].get("nvswitch") else "NVLink"
    text = (f"one GPU per process ({cvd_text(f)}) on an {kind} node, NCCL_ALGO="
            f"{algo if algo else 'unset'} (Ring allowed); {nccl_text(f)}. Ring all-reduce and "
            "broadcast between processes that each see one GPU were reported to hang at >= 16M "
            "elements (64 MB fp32) on 8 x H200 NVSwitch nodes while Tree worked at every size "
            "(ray#61073, NVIDIA/nccl#2024 with NCCL 2.27.5; NCCL_CUMEM_ENABLE=0 and "
            "NCCL_NVLS_ENABLE=0 did not help there).")
    if (f["visible"].get("host_gpus") or 0) <= 2:  # measured here: 2 masked H200s ran 1 GiB fine
        return {"severity": "info", "evidence": text + " On 2 GPUs this project's baseline (NCCL "
                "2.28.9, 2 x H200, masked) saw no hang up to 1 GiB."}
    return text


def check_p2p_disabled(f):
    if not truthy(nenv(f, "NCCL_P2P_DISABLE")):
        return None
    return (f"NCCL_P2P_DISABLE={nenv(f, 'NCCL_P2P_DISABLE')}: NCCL stops using NVLink/PCIe peer "
            "access between GPUs of a node and copies through host shared memory (or the network), "
            "a fraction of the link bandwidth.")


def check_shm_disabled(f):
    if not truthy(nenv(f, "NCCL_SHM_DISABLE")):
        return None
    both = truthy(nenv(f, "NCCL_P2P_DISABLE"))
    return {"severity": "warn" if both else "info",
            "evidence": f"NCCL_SHM_DISABLE={nenv(f, 'NCCL_SHM_DISABLE')}" + (
                " together with NCCL_P2P_DISABLE: GPUs of one node talk through the network "
                "transport (sockets or IB loopback)." if both else
                ": harmless while P2P works, but where P2P is not possible between two GPUs of a "
                "node their traffic goes through the network transport.")}


def check_net_socket(f):
    net = nenv(f, "NCCL_NET")
    if not net or net.lower() != "socket" or not f.get("ib_devices"):
        return None
    return (f"NCCL_NET={net} while this host has RDMA devices ({', '.join(f['ib_devices'])}): "
            "traffic between nodes goes over TCP sockets instead of IB/RoCE/EFA.")


def check_ib_disabled(f):
    if not truthy(nenv(f, "NCCL_IB_DISABLE")) or not f.get("ib_devices"):
        return None
    return (f"NCCL_IB_DISABLE={nenv(f, 'NCCL_IB_DISABLE')} while this host has RDMA devices "
            f"({', '.join(f['ib_devices'])}): only matters between nodes, where NCCL then uses "
            "TCP sockets.")


_P2P_LEVELS = {"LOC": 0, "NVL": 1, "PIX": 2, "PXB": 3, "PHB": 4, "SYS": 5}
_P2P_INT = {0: "LOC", 1: "PIX", 2: "PXB", 3: "PHB"}  # deprecated integers; >= 4 is SYS
_NEEDED = {"BOARD": "PIX", "PIX": "PIX", "PXB": "PXB", "PHB": "PHB", "NODE": "PHB", "SYS": "SYS"}


def check_p2p_level(f):
    raw = nenv(f, "NCCL_P2P_LEVEL")
    if not raw:
        return None
    name = _P2P_INT.get(int(raw), "SYS") if raw.isdigit() else raw.upper()
    level = _P2P_LEVELS.get(name)
    if level is None:
        return None
    cut = []
    for pair, link in (f.get("nvml") or {}).get("links", {}).items():
        need = "NVL" if link["type"].startswith("NV") else _NEEDED.get(link["type"])
        if need and _P2P_LEVELS[need] > level:
            cut.append(f"GPU {pair.replace(',', '-')} ({link['type']})")
    if not cut and level > 0:
        return None
    what = ", ".join(cut[:6]) + (f" and {len(cut) - 6} more" if len(cut) > 6 else "") if cut else "every pair"
    return (f"NCCL_P2P_LEVEL={raw} is below what the links need, so NCCL will not use P2P "
            f"between {what}.")


def check_hostid(f):
    v = nenv(f, "NCCL_HOSTID")
    if v is None:
        return None
    return (f"NCCL_HOSTID={v}: NCCL treats processes with different host ids as different nodes "
            "and connects them through the network transport, even on one host (the actorcc "
            "project measured about 3.8 GB/s over loopback sockets on an H200 host).")


def check_few_channels(f):
    low = {k: nenv(f, k) for k in ("NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS")
           if (nenv(f, k) or "").isdigit() and int(nenv(f, k)) <= 2}
    if not low:
        return None
    return ", ".join(f"{k}={v}" for k, v in low.items()) + (
        ": NCCL may use only that many channels (thread blocks), far below what NVLink needs "
        "for bandwidth.")


def check_cvd_invalid(f):
    v = f["visible"]
    if v.get("invalid") is None:
        return None
    ign = f"; CUDA also ignores what follows: {','.join(v['ignored'])}" if v["ignored"] else ""
    return (f"CUDA_VISIBLE_DEVICES={v['env']!r}: entry {v['invalid']!r} names no GPU of this host "
            f"(or repeats one){ign}. This process sees {len(v['physical'])} GPU(s).")


def check_cvd_order_note(f):
    return f["visible"].get("note")


def check_fabric(f):
    bad = []
    for g in (f.get("nvml") or {}).get("gpus", []):
        fab = g.get("fabric") or {}
        if fab.get("state") in ("not-started", "in-progress") or (
                fab.get("state") == "completed" and fab.get("status") not in (0, None)):
            bad.append(f"GPU {g['index']} fabric {fab['state']} (status {fab.get('status')})")
    return "; ".join(bad) + (": the NVSwitch fabric is not ready, CUDA/NCCL over NVLink will "
                            "fail or fall back.") if bad else None


def check_vmm(f):
    v = f.get("vmm") or {}
    if v.get("status") != "failed":
        return None
    return (f"VMM POSIX-fd sharing between two processes failed on GPUs {v.get('gpus')}: "
            f"{v.get('detail')}. actorcc's intra-node IPC transport needs it (NCCL's cuMem path too).")


def check_group_join(f):
    j = f.get("group_join")
    if not j:
        return None
    return {"evidence": f"rank {j['rank']} of {j['world']}, waiting {j['join_timeout_s']:g} s: {j['error']}",
            "ranks": [j["rank"]]}


def check_nccl_copies(f):
    n = f.get("nccl") or {}
    if not n.get("versions_differ"):
        return None
    lst = "; ".join(f"{c['version']} from {c.get('path') or c['source']}" for c in n["candidates"]
                    if c.get("version"))
    return f"more than one NCCL here: {lst}. Which one a process gets depends on what it loads first."


def check_nccl_abi(f):
    abi = (f.get("nccl") or {}).get("abi") or {}
    if not abi.get("warnings"):
        return None
    return "; ".join(abi["warnings"]) + "."


def check_no_nvml(f):
    nv = f.get("nvml") or {}
    if nv.get("available"):
        return None
    return f"NVML not available ({nv.get('error')}): no GPU facts; GPU rules could not run."


# ---------------------------------------------------------------- group checks
def _ranks_by(g, key):
    out = {}
    for f in g["ranks"]:
        out.setdefault(key(f), []).append(f["rank"])
    return out


def _differ(g, key, what):
    groups = _ranks_by(g, key)
    if len(groups) < 2:
        return None
    parts = [f"{what}={val} on ranks {_ranklist(r)}" for val, r in groups.items()]
    return {"evidence": "; ".join(parts), "ranks": sorted(r for rs in groups.values() for r in rs)}


def _ranklist(ranks):
    ranks = sorted(ranks)
    return ",".join(map(str, ranks)) if len(ranks) <= 8 else f"{ranks[0]}..{ranks[-1]} ({len(ranks)})"


def check_nccl_version_mismatch(g):
    return _differ(g, lambda f: (f.get("nccl") or {}).get("version"), "NCCL")


def check_nccl_provider_mismatch(g):
    return _differ(g, lambda f: ((f.get("nccl") or {}).get("abi") or {}).get("provider") or "unknown",
                   "NCCL library by")


def check_driver_mismatch(g):
    return _differ(g, lambda f: (f.get("nvml") or {}).get("driver_version"), "driver")


def check_actorcc_mismatch(g):
    return _differ(g, lambda f: f.get("actorcc_version"), "actorcc")


_MUST_MATCH = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_BUFFSIZE", "NCCL_NVLS_ENABLE", "NCCL_P2P_DISABLE",
               "NCCL_SHM_DISABLE", "NCCL_NET", "NCCL_IB_DISABLE", "NCCL_CUMEM_ENABLE")


def check_env_mismatch(g):
    names = sorted({k for f in g["ranks"] for k in f["env"]["nccl"]})
    parts, ranks, severe = [], set(), False
    for k in names:
        vals = _ranks_by(g, lambda f, k=k: f["env"]["nccl"].get(k, "(unset)"))
        if len(vals) > 1:
            parts.append(f"{k}: " + ", ".join(f"{v!r} on ranks {_ranklist(r)}" for v, r in vals.items()))
            # The ranks outside the one largest group are the odd ones; with no single largest
            # group (say 1 rank against 1) nobody can tell which side is wrong: name every rank.
            sizes = sorted((len(r) for r in vals.values()), reverse=True)
            if sizes[0] == sizes[1]:
                ranks.update(r for rs in vals.values() for r in rs)
            else:
                largest = max(vals.values(), key=len)
                ranks.update(r for rs in vals.values() if rs is not largest for r in rs)
            severe |= k in _MUST_MATCH
    if not parts:
        return None
    return {"evidence": "; ".join(parts), "ranks": sorted(ranks), "severity": "error" if severe else "warn"}


def check_cvd_shape(g):
    bad = []
    for node in g["nodes"]:
        fs = [g["ranks"][r] for r in node["ranks"]]
        shapes = _ranks_by({"ranks": fs}, lambda f: "unset" if f["visible"]["env"] is None
                           else f"{len(f['visible']['physical'])} GPU(s)")
        if len(shapes) > 1:
            bad.append(f"{node['hostname']}: " + ", ".join(
                f"CUDA_VISIBLE_DEVICES {s} on ranks {_ranklist(r)}" for s, r in shapes.items()))
    return {"evidence": "; ".join(bad)} if bad else None


def check_shared_gpu(g):
    used = _ranks_by({"ranks": [f for f in g["ranks"] if f.get("gpu")]},
                     lambda f: (f["host"]["host_id"], f["gpu"]["uuid"]))
    dup = {k: r for k, r in used.items() if len(r) > 1}
    if not dup:
        return None
    return {"evidence": "; ".join(f"ranks {_ranklist(r)} all use GPU {uuid} on {host.split('/')[0]}"
                                  for (host, uuid), r in dup.items()),
            "ranks": sorted(r for rs in dup.values() for r in rs)}


def check_nvls_rank_order(g):
    bad = []
    for node in g["nodes"]:
        fs = [g["ranks"][r] for r in node["ranks"]]
        phys = [f["gpu"]["index"] for f in fs if f.get("gpu")]
        f0 = fs[0]
        ver = nccl_version(f0)
        if (len(phys) == len(fs) >= 2 and phys != sorted(phys) and ver and ver > (2, 21, 5)
                and nvls_possible(f0)):
            bad.append(f"{node['hostname']}: ranks {_ranklist(node['ranks'])} use physical GPUs "
                       f"{phys} (not ascending)")
    if not bad:
        return None
    return ("; ".join(bad) + f"; NVSwitch present, NVLS not disabled, {nccl_text(g['ranks'][0])}. "
            "(Inferred from #1906: its trigger is a rank order that differs from the GPUs' "
            "physical order, which one-GPU actors get from how they were scheduled.)")


def check_collective_failed(g):
    errs = (g.get("measure") or {}).get("collective_errors") or {}
    if not errs:
        return None
    ranks = sorted(int(r) for r in errs)
    first = errs[str(ranks[0])]
    return {"evidence": f"the first 4 KB all-reduce failed on ranks {_ranklist(ranks)}: {first}",
            "ranks": ranks}


def check_first_collective(g):
    t = (g.get("measure") or {}).get("first_collective_s") or []
    if not t or max(t) <= 1.0:
        return None
    worst = max(range(len(t)), key=lambda r: t[r])
    return {"evidence": f"the group's first 4 KB all-reduce (after a host barrier) took {t[worst]:.2f} s "
                        f"on rank {worst}; later ones take microseconds to milliseconds.", "ranks": [worst]}


def check_bandwidth(g):
    low = []
    for b in (g.get("measure") or {}).get("bandwidth", []):
        exp = b.get("expected_busbw_gbs")
        if exp and b.get("bytes", 0) >= (64 << 20) and b["busbw_gbs"] < 0.4 * exp:
            low.append(f"{b['scope']}: {b['busbw_gbs']:.1f} GB/s busbw at {b['bytes'] >> 20} MiB, "
                       f"links allow about {exp:.0f} GB/s")
    return "; ".join(low) + "." if low else None


def check_ib_multinode(g):
    if len(g["nodes"]) < 2:
        return None
    r = [f["rank"] for f in g["ranks"] if truthy(nenv(f, "NCCL_IB_DISABLE")) and f.get("ib_devices")]
    return {"evidence": f"NCCL_IB_DISABLE set on ranks {_ranklist(r)} of a {len(g['nodes'])}-node "
                        "group whose hosts have RDMA devices: inter-node traffic uses TCP sockets.",
            "ranks": r} if r else None


# ---------------------------------------------------------------- the table
FIX_CUMEM = ("Set NCCL_CUMEM_ENABLE=0 in the actors' own environment (Ray: runtime_env={'env_vars': "
             "{'NCCL_CUMEM_ENABLE': '0'}}; setting it on the driver does not reach them), or let each "
             "actor see all GPUs and pick its own (RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES=1), or "
             "use actorcc for traffic inside a node (VMM fd sharing, no NCCL cuMem import).")

RULES: list[Rule] = [
    Rule("cumem-masked-import", "warn",
         "Masked GPUs + NCCL cuMem: slow first collective or 'invalid device ordinal'",
         (NCCL_ISSUE + "1749", NCCL_ISSUE + "1948", NCCL_ISSUE + "1647"), FIX_CUMEM, check_cumem_masked),
    Rule("nvls-permuted-allgather", "error",
         "Permuted GPUs + NVLS: all-gather may return chunks in the wrong rank order",
         (NCCL_ISSUE + "1906", "https://github.com/NVIDIA/nccl/pull/2377"),
         "Set NCCL_NVLS_ENABLE=0 on every rank, or list GPUs in ascending order "
         "(CUDA_VISIBLE_DEVICES=0,1,2,...), or use NCCL 2.21.5 until a release carries the fix.",
         check_nvls_permuted),
    Rule("ring-hang-masked-nvswitch", "warn",
         "One GPU per process on an NVLink/NVSwitch node: Ring collectives >= 16M elements may hang",
         ("https://github.com/ray-project/ray/issues/61073", NCCL_ISSUE + "2024"),
         "Set NCCL_ALGO=Tree (all-reduce) in the actors' environment, or use actorcc for traffic "
         "inside a node; keep broadcasts below 16M elements or chunk them.", check_ring_hang),
    Rule("cvd-invalid", "error", "CUDA_VISIBLE_DEVICES names a GPU that does not exist",
         (CUDA_ENV_DOC,), "Fix the list: indices 0..N-1 or full GPU-... UUIDs of this host.",
         check_cvd_invalid),
    Rule("fabric-not-ready", "error", "NVSwitch fabric not ready",
         (FABRIC_DOC,), "Start nvidia-fabricmanager (systemctl status nvidia-fabricmanager) and "
         "wait until nvidia-smi -q shows Fabric State: Completed.", check_fabric),
    Rule("p2p-disabled", "warn", "NCCL_P2P_DISABLE turns off NVLink/PCIe P2P",
         (NCCL_ENV_DOC,), "Unset NCCL_P2P_DISABLE (it is a debugging switch).", check_p2p_disabled),
    Rule("shm-disabled", "info", "NCCL_SHM_DISABLE set",
         (NCCL_ENV_DOC,), "Unset NCCL_SHM_DISABLE unless it works around a known problem.",
         check_shm_disabled),
    Rule("p2p-level-low", "warn", "NCCL_P2P_LEVEL too low for the links between these GPUs",
         (NCCL_ENV_DOC,), "Unset NCCL_P2P_LEVEL (NCCL picks from the topology) or raise it "
         "(NVL for NVLink, SYS to allow every path).", check_p2p_level),
    Rule("net-socket-forced", "warn", "NCCL_NET=Socket on a host with RDMA devices",
         (NCCL_ENV_DOC,), "Unset NCCL_NET so NCCL picks IB (or the EFA/aws-ofi-nccl plugin).",
         check_net_socket),
    Rule("ib-disabled", "info", "NCCL_IB_DISABLE set on a host with RDMA devices",
         (NCCL_ENV_DOC,), "Unset NCCL_IB_DISABLE for multi-node jobs.", check_ib_disabled),
    Rule("hostid-set", "warn", "NCCL_HOSTID splits one host into several NCCL nodes",
         (NCCL_ENV_DOC,), "Unset NCCL_HOSTID unless you are simulating nodes on purpose.", check_hostid),
    Rule("few-channels", "warn", "NCCL limited to very few channels",
         (NCCL_ENV_DOC,), "Unset NCCL_MAX_NCHANNELS / NCCL_MAX_CTAS.", check_few_channels),
    Rule("vmm-fd-sharing-failed", "warn", "CUDA VMM POSIX-fd sharing between processes failed",
         ("https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#virtual-memory-management",),
         "Check the probe's message: containers need the other GPU's /dev/nvidia* node and a "
         "driver with VMM IPC; without it actorcc falls back to slower paths.", check_vmm),
    Rule("cvd-order-ambiguous", "warn", "CUDA_VISIBLE_DEVICES indices may not mean NVML indices",
         (CUDA_ENV_DOC,), "Set CUDA_DEVICE_ORDER=PCI_BUS_ID or use GPU UUIDs.", check_cvd_order_note),
    Rule("nccl-multiple-copies", "info", "Several NCCL versions installed",
         (NCCL_ENV_DOC,), "Keep one (the one torch ships), or make sure every rank loads the same.",
         check_nccl_copies),
    Rule("group-join-failed", "error", "The doctor's group did not form (a rank missing or refused)",
         (), "Start the doctor on every rank with the same --uid (or --address) and --world and a "
         "distinct --rank; raise --join-timeout where ranks start slowly. The ranks the error names "
         "are the ones to look at.", check_group_join),
    Rule("nccl-abi-mixed", "warn", "This process mixes actorcc's NCCL with NVIDIA's (or cannot load actorcc's)",
         ("docs/nccl-use.md",), "Turn actorcc's NCCL on one way only (LD_PRELOAD, or LD_AUDIT) before the "
         "process starts, and point VLLM_NCCL_SO_PATH at the same file: python -m actorcc.nccl --env "
         "prints the lines; actorcc.ray.nccl_runtime_env() does it for Ray actors.", check_nccl_abi),
    Rule("no-nvml", "info", "No NVIDIA driver (NVML) here", (), "Run on a GPU host for GPU checks.",
         check_no_nvml),
    # ---- group rules: facts of every rank, gathered over the communicator
    Rule("nccl-version-mismatch", "error", "Ranks load different NCCL versions",
         (NCCL_ENV_DOC,), "Install one NCCL version in every actor's environment (same torch wheel, "
         "same nvidia-nccl-cu* wheel).", check_nccl_version_mismatch, "group"),
    Rule("nccl-provider-mismatch", "error", "Some ranks load actorcc's NCCL and others NVIDIA's",
         ("docs/nccl-use.md",), "Give every rank the same environment (actorcc.ray.nccl_runtime_env() for "
         "every actor, or the same LD_PRELOAD on every process): the two libraries cannot form one "
         "communicator.", check_nccl_provider_mismatch, "group"),
    Rule("driver-version-mismatch", "warn", "Hosts run different NVIDIA driver versions",
         (), "Use one driver version across the cluster.", check_driver_mismatch, "group"),
    Rule("actorcc-version-mismatch", "error", "Ranks run different actorcc versions",
         (), "Install the same actorcc in every actor's environment.", check_actorcc_mismatch, "group"),
    Rule("nccl-env-mismatch", "warn", "NCCL_* settings differ between ranks (env did not reach the workers?)",
         ("https://docs.ray.io/en/latest/ray-core/handling-dependencies.html#runtime-environments",),
         "Set NCCL_* in the actors' runtime_env (env_vars), not only in the driver's shell, so every "
         "rank gets the same values; settings such as NCCL_ALGO/NCCL_PROTO must match on all ranks.",
         check_env_mismatch, "group"),
    Rule("cvd-shape-mismatch", "warn", "Ranks of one node see different numbers of GPUs",
         (CUDA_ENV_DOC,), "Start every actor the same way (all masked to one GPU, or all unmasked).",
         check_cvd_shape, "group"),
    Rule("shared-gpu", "error", "Two ranks use the same GPU",
         (), "Give each rank its own GPU (Ray: num_gpus=1 per actor; check CUDA_VISIBLE_DEVICES and "
         "the device each rank selects). NCCL refuses duplicate GPUs in a communicator, and so does "
         "actorcc unless ACTORCC_CUDA_SHARE_GPU=1 (for tests only: the GPU time-slices the ranks).",
         check_shared_gpu, "group"),
    Rule("nvls-rank-order", "error", "Rank order differs from physical GPU order with NVLS on",
         (NCCL_ISSUE + "1906",), "Set NCCL_NVLS_ENABLE=0, or assign ranks in physical GPU order (sort "
         "actors by GPU PCI bus id before giving ranks).", check_nvls_rank_order, "group"),
    Rule("collective-failed", "error", "A small all-reduce over the group failed",
         (), "Read the error: it names the rank at fault (unreachable host, GPU not usable, "
         "timeout); the findings above often say why.", check_collective_failed, "group"),
    Rule("first-collective-slow", "warn", "The first collective is slow",
         (), "Compare with the VMM probe's import time in the facts and look for other processes "
         "on the GPUs; warm the communicator up with one small collective at start-up.",
         check_first_collective, "group"),
    Rule("bandwidth-low", "warn", "All-reduce bandwidth far below what the links allow",
         (), "Check NCCL_P2P_*/NCCL_SHM_* settings, that the GPUs' NVLinks are up (nvidia-smi "
         "nvlink -s), and other jobs on the GPUs.", check_bandwidth, "group"),
    Rule("ib-disabled-multinode", "warn", "NCCL_IB_DISABLE in a multi-node group",
         (NCCL_ENV_DOC,), "Unset NCCL_IB_DISABLE in the actors' environment.", check_ib_multinode, "group"),
]


def by_id(rule_id: str) -> Rule:
    return next(r for r in RULES if r.id == rule_id)


def sort_findings(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda x: (SEVERITY_ORDER[x.severity], x.rule))


def evaluate_local(facts: dict) -> list[Finding]:
    return sort_findings([x for r in RULES if r.scope == "local" for x in [r.run(facts)] if x])


def evaluate_group(group: dict) -> list[Finding]:
    """Local rules on every rank (one finding per rule, naming the ranks) plus group rules."""
    out = []
    for r in RULES:
        if r.scope == "group":
            x = r.run(group)
            if x:
                out.append(x)
            continue
        hits = [(f["rank"], x) for f in group["ranks"] for x in [r.run(f)] if x]
        if not hits:
            continue
        texts = {}
        for rank, x in hits:
            texts.setdefault(x.evidence, []).append(rank)
        first = hits[0][1]
        (text, rs), others = next(iter(texts.items())), [r for t in list(texts)[1:] for r in texts[t]]
        first.evidence = text if not others else (
            f"rank{'s' if len(rs) > 1 else ''} {_ranklist(rs)}: {text} (the same, with their own "
            f"values, on ranks {_ranklist(others)})")
        first.severity = min((x.severity for _, x in hits), key=SEVERITY_ORDER.get)
        first.ranks = sorted(rank for rank, _ in hits)
        out.append(first)
    return sort_findings(out)
