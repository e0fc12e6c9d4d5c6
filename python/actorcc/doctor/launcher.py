"""Group mode from the usual launcher variables: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (as
torchrun, torch.distributed's env:// and most job launchers set them).

Rank 0 hosts the group's root on MASTER_ADDR:MASTER_PORT and the others join it there (the
vLLM-style Communicator.from_address). Under torchrun that port already belongs to torchrun's
own store (TORCHELASTIC_USE_AGENT_STORE=True): then rank 0 makes a UniqueId and hands it to the
others through that store instead.
"""
from __future__ import annotations

import os

VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
STORE_KEY = "actorcc-doctor/uid"


class Refusal(Exception):
    """Group mode was asked for but cannot form: the text says what to add."""


def present(environ=None) -> dict:
    env = os.environ if environ is None else environ
    return {k: env[k] for k in VARIABLES if env.get(k)}


def resolve(rank, world, environ=None) -> dict:
    """{rank, world, host, port, via_store} from the flags (which win) and the launcher
    variables; raises Refusal naming what is missing."""
    env = os.environ if environ is None else environ
    have = present(env)
    rank = rank if rank is not None else have.get("RANK")
    world = world if world is not None else have.get("WORLD_SIZE")
    missing = [k for k, v in (("--rank or RANK", rank), ("--world or WORLD_SIZE", world)) if v is None]
    missing += [k for k in ("MASTER_ADDR", "MASTER_PORT") if k not in have]
    if missing:
        raise Refusal(
            "actorcc-doctor: group mode (--rank/--world, or RANK/WORLD_SIZE) needs to know where rank 0 "
            f"hosts the group; missing: {', '.join(missing)}. In every rank either set MASTER_ADDR and "
            "MASTER_PORT (rank 0's address and a free port, as torchrun sets them), or add "
            "--address HOST:PORT (rank 0 listens there), or add --uid create on rank 0 and "
            "--uid <the id it prints> on the others.")
    try:
        rank, world, port = int(rank), int(world), int(have["MASTER_PORT"])
    except ValueError as e:
        raise Refusal(f"actorcc-doctor: launcher variables must be integers ({e}): {have}") from None
    if not 0 <= rank < world:
        raise Refusal(f"actorcc-doctor: rank {rank} is not in a group of {world} (RANK must be in 0..WORLD_SIZE-1)")
    return {"rank": rank, "world": world, "host": have["MASTER_ADDR"], "port": port,
            "via_store": env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"}


def uid_from_store(where: dict, join_timeout: float) -> str:
    """Under torchrun: rank 0 publishes a fresh UniqueId in torchrun's store, the others read it."""
    from datetime import timedelta

    import torch.distributed as dist

    from .group import create_unique_id
    store = dist.TCPStore(where["host"], where["port"], world_size=where["world"], is_master=False,
                          timeout=timedelta(seconds=join_timeout))
    if where["rank"] == 0:
        uid = str(create_unique_id())
        store.set(STORE_KEY, uid)
        return uid
    return store.get(STORE_KEY).decode()
