"""actorcc.ray.doctor(actors): run the group doctor inside each Ray actor, from the driver.

The driver creates a UniqueId (its root lives in the driver process), then runs the doctor
in every actor through Ray's __ray_call__ (no method needed on the actor class), so each rank
reports the environment its actor really has. Actors must be idle: a busy synchronous actor
runs the call only after its current method returns.
"""
from __future__ import annotations


def _actor_side(_self, uid_text: str, rank: int, world: int, kw: dict) -> dict:
    from actorcc.doctor import group
    comm = group.make_communicator(rank, world, uid=uid_text)
    try:
        return group.run(comm, **kw)
    finally:
        group._close(comm)


def doctor(actors, *, timeout: float = 600.0, **kw):
    """Report of the group formed by `actors` in list order (rank i = actors[i]): a dict that
    prints as the command line's text (print(report); report["findings"] as before).

    Keywords as actorcc.doctor(comm): bandwidth, sizes, vmm, torch_mode.
    """
    import ray

    from actorcc.doctor import group
    actors = list(actors)
    uid = group.create_unique_id()
    refs = [a.__ray_call__.remote(_actor_side, str(uid), r, len(actors), kw) for r, a in enumerate(actors)]
    reports = ray.get(refs, timeout=timeout)
    from actorcc.doctor.report import Report
    return Report(reports[0])
