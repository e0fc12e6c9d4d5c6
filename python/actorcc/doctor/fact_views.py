"""What the doctor's rules (rules.py) read from a process's facts: versions, NCCL variables,
CUDA_VISIBLE_DEVICES and NCCL as text, and whether cuMem, NVLink or NVLS are in play."""
from __future__ import annotations


def parse_version(text) -> tuple[int, ...] | None:
    try:
        return tuple(int(p) for p in str(text).split("+")[0].split(".")[:3])
    except (TypeError, ValueError):
        return None


def nccl_version(f: dict) -> tuple[int, ...] | None:
    return parse_version((f.get("nccl") or {}).get("version"))


def nenv(f: dict, name: str) -> str | None:
    v = f.get("env", {}).get("nccl", {}).get(name)
    return None if v is None else v.strip()


def truthy(v: str | None) -> bool:
    return v is not None and v.lower() not in ("", "0", "false", "no", "off")


def algo_allows(value: str | None, algo: str, coll: str = "allreduce") -> bool:
    """Whether NCCL_ALGO lets NCCL pick `algo` for `coll`: unset, a list ("Tree,Ring"), an
    exclusion ("^Ring"), or per collective ("allreduce:tree;broadcast:ring", NCCL >= 2.24)."""
    if not value:
        return True
    v = value.strip().lower()
    if ":" in v:
        parts = dict(p.split(":", 1) for p in v.split(";") if ":" in p)
        if coll not in {k.strip() for k in parts}:
            return True
        v = next(a for k, a in parts.items() if k.strip() == coll).strip()
    names = {a.strip() for a in v.lstrip("^").split(",") if a.strip()}
    return algo not in names if v.startswith("^") else algo in names


def cvd_text(f: dict) -> str:
    v = f["visible"]
    phys = ",".join(map(str, v["physical"])) or "none"
    if v.get("masked_by"):
        return f"one GPU visible (physical GPU {phys}): {v['masked_by']}"
    return (f"CUDA_VISIBLE_DEVICES={v['env']!r} -> physical GPU {phys} of {v['host_gpus']}"
            if v["env"] is not None else "CUDA_VISIBLE_DEVICES unset")


def nccl_text(f: dict) -> str:
    n = f.get("nccl") or {}
    top = next((c for c in n.get("candidates", []) if c.get("version") == n.get("version")), {})
    return f"NCCL {n.get('version')} ({top.get('path') or top.get('source') or 'unknown path'})"


def cumem_on(f: dict) -> bool:
    v = nenv(f, "NCCL_CUMEM_ENABLE")
    if v is not None:
        return v != "0"
    ver = nccl_version(f)
    return ver is not None and ver >= (2, 19)  # on by default since NCCL 2.19


def nvlink_node(f: dict) -> bool:
    nv = f.get("nvml") or {}
    return bool(nv.get("nvswitch")) or any(g.get("nvlinks_active") for g in nv.get("gpus", []))


def nvls_possible(f: dict) -> bool:
    return (nenv(f, "NCCL_NVLS_ENABLE") != "0" and bool((f.get("nvml") or {}).get("nvswitch"))
            and algo_allows(nenv(f, "NCCL_ALGO"), "nvls", "allgather"))
