"""actorcc-doctor command line (also `python -m actorcc.doctor`).

Exit status: 0 when no finding is an error (or a warning, with --fail-on warn), 1 otherwise,
2 for bad usage; so it can gate a job.
"""
from __future__ import annotations

import argparse
import json
import sys

from . import group as group_defaults
from . import launcher
from . import report as report_mod
from . import rules

SIZE_SUFFIX = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _sizes(text: str) -> tuple[int, ...]:
    out = []
    for part in text.split(","):
        part = part.strip().upper().rstrip("B")
        mult = SIZE_SUFFIX.get(part[-1:], 1)
        out.append(int(float(part.rstrip("KMG")) * mult))
    return tuple(out)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="actorcc-doctor",
        description="Diagnose NCCL/CUDA set-ups of GPU actors: masked or permuted GPUs, NCCL "
                    "versions and settings, NVLink/NVSwitch, VMM fd sharing; with --rank/--world "
                    "every rank runs it and the ranks are compared.")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--no-vmm", action="store_true", help="skip the VMM POSIX-fd sharing probe")
    p.add_argument("--torch", action="store_true", help="import torch to ask which NCCL it uses")
    p.add_argument("--facts", metavar="FILE", help="evaluate the facts of a saved --json report")
    p.add_argument("--fail-on", choices=("error", "warn"), default="error",
                   help="lowest severity that makes the exit status 1 (default: error)")
    p.add_argument("--list-rules", action="store_true", help="print the rules and exit")
    p.add_argument("--local", action="store_true",
                   help="local mode even where launcher variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) are set")
    g = p.add_argument_group(
        "group mode (run once per rank)",
        "The group forms from --uid or --address with --rank/--world, or else from the launcher "
        "variables RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (as torchrun sets them; rank 0 hosts the "
        "group on MASTER_ADDR:MASTER_PORT): under torchrun, or with those set, no flag is needed.")
    g.add_argument("--uid", help="the group's UniqueId (hex); 'create' makes one here, prints it "
                                 "to stderr and joins with it")
    g.add_argument("--address", help="host:port of rank 0, which hosts the group (instead of --uid)")
    g.add_argument("--rank", type=int)
    g.add_argument("--world", type=int)
    g.add_argument("--join-timeout", type=float, default=group_defaults.JOIN_TIMEOUT_S, metavar="SECONDS",
                   help="how long the ranks may take to arrive; a rank missing after it is reported as a "
                        f"finding (default {group_defaults.JOIN_TIMEOUT_S:g})")
    g.add_argument("--no-bandwidth", action="store_true", help="skip the all-reduce bandwidth probe")
    g.add_argument("--bw-sizes", type=_sizes, help="bandwidth probe sizes, e.g. 1M,256M")
    return p


def _exit_status(report: dict, fail_on: str) -> int:
    s = report["summary"]
    return 1 if s["error"] or (fail_on == "warn" and s["warn"]) else 0


def _from_file(path: str) -> dict:
    with open(path) as fh:
        data = json.load(fh)
    facts = data.get("facts", data)
    if facts.get("mode") == "group":
        return report_mod.build("group", rules.evaluate_group(facts), facts)
    return report_mod.build("local", rules.evaluate_local(facts), facts)


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.list_rules:
        for r in rules.RULES:
            print(f"{r.severity:<5} {r.scope:<5} {r.id:<28} {r.title}")
            for s in r.sources:
                print(f"{'':40}{s}")
        return 0
    grouped = args.uid is not None or args.address is not None
    if grouped and (args.rank is None or args.world is None):
        print("actorcc-doctor: group mode needs --rank and --world", file=sys.stderr)
        return 2
    where = None
    if not grouped and not args.facts and not args.local:
        have = launcher.present()
        if args.rank is not None or args.world is not None or len(have) == len(launcher.VARIABLES):
            try:
                where = launcher.resolve(args.rank, args.world)
            except launcher.Refusal as e:
                print(e, file=sys.stderr)
                return 2
            args.rank, args.world, grouped = where["rank"], where["world"], True
        elif "RANK" in have or "WORLD_SIZE" in have:
            print(f"actorcc-doctor: {', '.join(sorted(have))} set but not all of {', '.join(launcher.VARIABLES)}: "
                  "running local mode (set the others, or pass --address HOST:PORT with --rank/--world, "
                  "for group mode)", file=sys.stderr)
    torch_mode = "import" if args.torch else "if-loaded"
    if args.facts:
        rep = _from_file(args.facts)
    elif grouped:
        from . import group
        uid, address = args.uid, args.address
        if uid == "create":
            uid = group.create_unique_id()
            print(f"actorcc-doctor: --uid {uid}", file=sys.stderr, flush=True)
        if args.join_timeout <= 0:
            print("actorcc-doctor: --join-timeout must be > 0 seconds", file=sys.stderr)
            return 2
        if where is not None:
            how = ("the id rank 0 puts in torchrun's store at" if where["via_store"] else "rank 0's root on")
            print(f"actorcc-doctor rank {args.rank}: group from RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, "
                  f"joining through {how} {where['host']}:{where['port']}", file=sys.stderr, flush=True)
            if where["via_store"]:
                uid = launcher.uid_from_store(where, args.join_timeout)
            else:
                address = f"{where['host']}:{where['port']}"
        print(f"actorcc-doctor rank {args.rank}: joining the group of {args.world} (waiting up to "
              f"{args.join_timeout:g} s for every rank)", file=sys.stderr, flush=True)
        rep = group.run_cli(args.rank, args.world, uid=uid, address=address, join_timeout=args.join_timeout,
                            bandwidth=not args.no_bandwidth, sizes=args.bw_sizes, vmm=not args.no_vmm,
                            torch_mode=torch_mode)
    else:
        from . import local
        rep = local(vmm=not args.no_vmm, torch_mode=torch_mode)
    if grouped and args.rank != 0 and not args.json and rep["mode"] == "group":
        s = rep["summary"]
        print(f"actorcc-doctor rank {args.rank}: {s['error']} error(s), {s['warn']} warning(s); "
              "full report on rank 0")
    elif args.json:
        print(json.dumps(rep, indent=1, default=str))
    else:
        print(report_mod.render(rep), end="")
    return _exit_status(rep, args.fail_on)


if __name__ == "__main__":
    sys.exit(main())
