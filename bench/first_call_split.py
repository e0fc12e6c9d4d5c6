#!/usr/bin/env python3
"""Where a report-shape run's first call went: the time from the last rank's arrival (its entry
into the init call) to the group's first result, split into the caller's steps and actorcc's.

    ACTORCC_LOG=info python bench/nccl_report_shape.py --world 4 --json run.json 2> run.log
    python bench/first_call_split.py --json run.json --log run.log

It reads the script's JSON (each rank's init entry and return, its first tensor, its first
result, as wall-clock times) and actorcc's info lines in the ranks' log (UTC time of day), and
lines them up on one clock:
  - "rank R/W ready: ... in X ms": each rank's construction of its communicator, which began
    X ms before the line (the join and the backend's setup);
  - "ncclAllReduce: rank R of W: the communicator's first call" (actorcc's libnccl.so.2 only):
    where the first collective reached the library.
Each milestone (the init call returned, the construction began and was done, the first tensor
made, the library called, the first result) is the group's: the moment the last rank passed it,
since the group moves at its slowest rank. Four spans cover the whole, named for who spends them:
the caller's steps before the construction (under torch: its init's store rendezvous, the first
tensor, and in its lazy creation the unique id through the store; under the API: its own local
steps only), the construction, the caller's steps between the construction and the call (torch's
streams and events; the API's first tensor), and the first call to its result. Prints them;
--out writes them as JSON.
"""
from __future__ import annotations

import argparse
import json
import re
import sys

READY = re.compile(r"\[actorcc \w+ pid (\d+) (\d\d):(\d\d):(\d\d\.\d{6})\] rank (\d+)/(\d+) ready: .*; in ([\d.]+) ms")
FIRST = re.compile(r"\[actorcc \w+ pid (\d+) (\d\d):(\d\d):(\d\d\.\d{6})\] \w+: rank (\d+) of (\d+): "
                   r"the communicator's first call")
DAY = 86400.0


def on_clock(hh, mm, ss, near):
    """A UTC time of day as the wall-clock time nearest `near` (a run spans seconds, not days)."""
    tod = int(hh) * 3600 + int(mm) * 60 + float(ss)
    t = near - near % DAY + tod
    return min((t - DAY, t, t + DAY), key=lambda c: abs(c - near))


def library_events(log_text, world, near):
    """Per rank: (construction start, construction end, first call) from actorcc's lines, for the
    communicator of this world size (a log may hold a sub-group's lines too: those are skipped)."""
    ranks = {}
    for m in READY.finditer(log_text):
        if int(m.group(6)) != world:
            continue
        end = on_clock(m.group(2), m.group(3), m.group(4), near)
        ranks.setdefault(int(m.group(5)), {})["built"] = (end - float(m.group(7)) / 1e3, end)
    for m in FIRST.finditer(log_text):
        if int(m.group(6)) == world:
            ranks.setdefault(int(m.group(5)), {}).setdefault("call", on_clock(m.group(2), m.group(3), m.group(4), near))
    return ranks


def split(run, log_text):
    """The milestones and spans of one run (the report-shape JSON's dict), in ms from the last
    arrival. Raises ValueError when the log lacks a rank's construction line."""
    ranks = run["ranks"]
    world = run["world"]
    t0 = max(r["init_entered"] for r in ranks)
    lib = library_events(log_text, world, t0)
    missing = sorted(set(range(world)) - {r for r, e in lib.items() if "built" in e})
    if missing:
        raise ValueError(f"no 'ready' line of rank(s) {missing} of {world} in the log (run with ACTORCC_LOG=info)")
    ms = lambda t: round((t - t0) * 1e3, 2)  # noqa: E731
    marks = {
        "init_returned": max(r["init_done"] for r in ranks),
        "construction_began": max(e["built"][0] for e in lib.values()),
        "construction_done": max(e["built"][1] for e in lib.values()),
        "first_tensor_made": max(r["init_done"] + r["first_tensor_s"] for r in ranks),
        "first_result": max(r["first_done"] for r in ranks),
    }
    calls = [e["call"] for e in lib.values() if "call" in e]
    if len(calls) == world:
        marks["library_called"] = max(calls)
    # The call enters the library once the communicator exists and the caller has made its
    # tensor; without the library's own line, that is the later of the two.
    entered = marks.get("library_called", max(marks["construction_done"], marks["first_tensor_made"]))
    made = marks["construction_done"]
    spans = {
        # before the construction: the rest of the init call, the tensor and, under torch's lazy
        # creation, the unique id through its store (all the caller's)
        "caller_before_construction": marks["construction_began"] - t0,
        "construction": made - marks["construction_began"],
        # between the construction and the call: torch's own streams and events (library), or the
        # first tensor (API, whose construction is the init call)
        "caller_after_construction": max(0.0, entered - made),
        "first_call_to_result": marks["first_result"] - entered,
    }
    return {"world": world, "last_arrival_to_first_result_ms": ms(marks["first_result"]),
            "milestones_ms": {k: ms(v) for k, v in sorted(marks.items(), key=lambda kv: kv[1])},
            "spans_ms": {k: round(v * 1e3, 2) for k, v in spans.items()},
            "per_rank": {str(r): {"construction_ms": round((e["built"][1] - e["built"][0]) * 1e3, 2),
                                  **({"library_called_ms": ms(e["call"])} if "call" in e else {})}
                         for r, e in sorted(lib.items()) if "built" in e}}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", required=True, help="bench/nccl_report_shape.py's --json")
    p.add_argument("--log", required=True, help="the run's output with the ranks' stderr (ACTORCC_LOG=info)")
    p.add_argument("--out", help="write the split here as JSON")
    args = p.parse_args()
    with open(args.json) as fh:
        run = json.load(fh)
    with open(args.log, errors="replace") as fh:
        log_text = fh.read()
    try:
        s = split(run, log_text)
    except ValueError as e:
        print(f"first_call_split: {e}", file=sys.stderr)
        return 2
    print(f"world {s['world']}: last arrival -> first result {s['last_arrival_to_first_result_ms']:.1f} ms")
    for k, v in s["milestones_ms"].items():
        print(f"  {v:8.2f} ms  {k.replace('_', ' ')}")
    print("  spans: " + ", ".join(f"{k.replace('_', ' ')} {v:.1f} ms" for k, v in s["spans_ms"].items()))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(s, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
