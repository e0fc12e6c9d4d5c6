"""actorcc-doctor: diagnoses the NCCL/CUDA set-up of GPU actors (one process per GPU).

    actorcc-doctor                 # local mode: this process and host
    actorcc.doctor(comm)           # group mode, collective: every rank calls it, all get the report
    actorcc.ray.doctor(actors)     # group mode from a Ray driver (actorcc/doctor/ray_hook.py)

Layout: nvml.py (GPUs through NVML), facts.py (what one process learns), rules.py (every
diagnosis, one table), fact_views.py (what the rules read from facts), group.py (cross-rank
gathering and measurements), report.py (text and JSON), __main__.py (CLI). Importing this
package is cheap: nothing runs until called.
"""
from __future__ import annotations

import sys
import types


def local(vmm: bool = True, torch_mode: str = "if-loaded") -> dict:
    """Report (dict) for this process and host, no communicator needed."""
    from . import facts, report, rules
    f = facts.collect_local(vmm=vmm, torch_mode=torch_mode)
    return report.build("local", rules.evaluate_local(f), f)


def doctor(comm=None, **kw) -> dict:
    """Group report over `comm` (collective), or the local report when comm is None.

    Keywords (group): bandwidth=True, sizes=(bytes, ...), vmm=True, torch_mode="if-loaded".
    """
    if comm is None:
        return local(**{k: v for k, v in kw.items() if k in ("vmm", "torch_mode")})
    from .group import run
    return run(comm, **kw)


def render(report: dict) -> str:
    """The human-readable form of a report dict."""
    from .report import render as _render
    return _render(report)


class _CallableModule(types.ModuleType):
    """Lets `actorcc.doctor(comm)` work while `actorcc.doctor` stays this package."""

    def __call__(self, comm=None, **kw):
        return doctor(comm, **kw)


sys.modules[__name__].__class__ = _CallableModule
