"""The report: a dict (what --json prints) and its short human form.

Findings come first, worst first, each with its evidence and fix; then the facts.
"""
from __future__ import annotations

import textwrap

from .rules import Finding

LABEL = {"error": "ERROR", "warn": "WARN ", "info": "info "}


class Report(dict):
    """A report: the dict that --json prints (keys tool, schema, mode, summary, exit_status,
    findings, facts), which prints as the command line's text: print(actorcc.ray.doctor(actors))."""

    def __str__(self) -> str:
        return render(self)

    __repr__ = __str__  # a REPL or notebook shows the report, not a wall of nested dicts


def build(mode: str, findings: list[Finding], facts: dict) -> Report:
    counts = {s: sum(1 for f in findings if f.severity == s) for s in ("error", "warn", "info")}
    return Report(tool="actorcc-doctor", schema=1, mode=mode, summary=counts,
                  exit_status=1 if counts["error"] else 0,
                  findings=[f.to_dict() for f in findings], facts=facts)


def _wrap(label: str, text: str, width: int = 100) -> list[str]:
    pad = " " * 16
    return textwrap.wrap(text, width, initial_indent=f"       {label:<9}", subsequent_indent=pad,
                         break_on_hyphens=False, break_long_words=False) or [pad]


def render(report: dict) -> str:
    s = report["summary"]
    facts = report["facts"]
    where = (f"{len(facts['ranks'])} ranks on {len(facts['nodes'])} node(s)" if report["mode"] == "group"
             else f"host {facts['host']['hostname']}")
    lines = [f"actorcc-doctor ({report['mode']}, {where}): {s['error']} error(s), "
             f"{s['warn']} warning(s), {s['info']} note(s)", ""]
    for f in report["findings"]:
        ranks = f" [ranks {','.join(map(str, f['ranks']))}]" if f.get("ranks") else ""
        lines.append(f"{LABEL[f['severity']]}  {f['rule']}: {f['title']}{ranks}")
        lines += _wrap("evidence", f["evidence"])
        lines += _wrap("fix", f["fix"])
        if f["sources"]:
            lines += _wrap("see", " ".join(f["sources"]))
        lines.append("")
    if not report["findings"]:
        lines += ["No problems found.", ""]
    lines.append("Facts")
    if report["mode"] == "group":
        lines += _group_facts(facts)
    else:
        lines += _local_facts(facts)
    return "\n".join(lines) + "\n"


def size_text(n: int) -> str:
    for unit, shift in (("GB", 30), ("MB", 20), ("KB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):g} {unit}"
    return f"{n} B"


def _row(name: str, value: str) -> str:
    return f"  {name:<13}{value}"


def _local_facts(f: dict) -> list[str]:
    nv, vis, n = f["nvml"], f["visible"], f["nccl"]
    out = [_row("host", f"{f['host']['hostname']} (pid {f['host']['pid']}, id {f['host']['host_id']})")]
    if nv["available"]:
        out.append(_row("driver", f"{nv['driver_version']} (CUDA {nv['cuda_driver_version']}), "
                                  f"{len(nv['gpus'])} GPU(s), NVSwitch: {'yes' if nv['nvswitch'] else 'no'}"))
        for g in nv["gpus"]:
            fab = (g.get("fabric") or {}).get("state", "n/a")
            out.append(_row(f"GPU {g['index']}", f"{g['name']} {g['uuid']} {g['pci_bus_id']} "
                                                 f"NVLinks {g['nvlinks_active']} (to switch "
                                                 f"{g['nvswitch_links']}) fabric {fab}"))
        kinds = {(v["type"], v["via"]) for v in nv["links"].values()}
        if len(kinds) == 1 and len(nv["links"]) > 1:
            t, via = kinds.pop()
            out.append(_row("links", f"every pair {t} ({via})"))
        elif nv["links"]:
            out.append(_row("links", " ".join(f"{k.replace(',', '-')}:{v['type']}"
                                              for k, v in nv["links"].items())))
    else:
        out.append(_row("GPUs", f"none seen ({nv['error']})"))
    env = "unset" if vis["env"] is None else repr(vis["env"])
    shape = ("" if vis["masked"] is None else
             f" -> physical {vis['physical']}, masked {'yes' if vis['masked'] else 'no'}, "
             f"permuted {'yes' if vis['permuted'] else 'no'}")
    out.append(_row("visible", f"CUDA_VISIBLE_DEVICES {env}{shape}"))
    cands = n["candidates"] or [{"source": "none found", "version": None}]
    out.append(_row("NCCL", f"{n['version'] or 'not found'}"))
    for c in cands:
        out.append(_row("", f"{c.get('version') or '?'}  {c.get('path') or ''}  [{c['source']}]"))
    if n.get("abi"):
        from ..nccl import summary
        out.append(_row("NCCL library", summary(n["abi"])))
    t = n.get("torch") or {}
    if t.get("installed") and not t.get("asked"):
        out.append(_row("", "torch installed, not imported (--torch asks it which NCCL it uses)"))
    out.append(_row("NCCL_* env", ", ".join(f"{k}={v}" for k, v in f["env"]["nccl"].items()) or "(none)"))
    if f["env"]["other"]:
        out.append(_row("other env", ", ".join(f"{k}={v}" for k, v in f["env"]["other"].items())))
    out.append(_row("RDMA devs", ", ".join(f["ib_devices"]) or "(none)"))
    v = f["vmm"]
    out.append(_row("VMM fd share", f"{v['status']}" + (f": {v['detail']}" if v.get("detail") else "")))
    out.append(_row("actorcc", f.get("actorcc_version") or "extension not loaded"))
    return out


def _group_facts(g: dict) -> list[str]:
    out = [_row("backend", str(g.get("backend")))]
    out.append("  rank  node  host             GPU (bus id)        CUDA_VISIBLE_DEVICES  NCCL")
    for f in g["ranks"]:
        gpu = f.get("gpu") or {}
        cvd = "unset" if f["visible"]["env"] is None else f["visible"]["env"]
        out.append(f"  {f['rank']:>4}  {f['node']:>4}  {f['host']['hostname'][:16]:<16} "
                   f"{(gpu.get('pci_bus_id') or '-'):<19} {cvd[:21]:<21} {f['nccl']['version'] or '-'}")
    m = g.get("measure") or {}
    if m.get("first_collective_s"):
        out.append(_row("first coll.", " ".join(f"{t * 1e3:.1f}ms" for t in m["first_collective_s"])
                        + "  (first 4 KB all-reduce, per rank)"))
    for b in m.get("bandwidth", []):
        exp = f", links allow ~{b['expected_busbw_gbs']:.0f}" if b.get("expected_busbw_gbs") else ""
        out.append(_row("bandwidth", f"{b['scope']}: {size_text(b['bytes'])} all-reduce {b['time_s'] * 1e6:.0f} us, "
                                     f"busbw {b['busbw_gbs']:.2f} GB/s{exp}"))
    if m.get("bandwidth_skipped"):
        out.append(_row("bandwidth", f"skipped: {m['bandwidth_skipped']}"))
    out.append("  rank 0 in detail:")
    out += ["  " + line for line in _local_facts(g["ranks"][0])]
    return out
