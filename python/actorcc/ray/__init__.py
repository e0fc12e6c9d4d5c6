"""Ray integration: groups of actors, and actorcc as a ``ray.util.collective`` backend.

Importing this module does not import ray; ray is needed only when a function is called.

From the driver, any actors (no special base class or method needed):

    import actorcc.ray
    actorcc.ray.create_group(actors, name="train", join_timeout=120)
    # inside each actor's methods:
    comm = actorcc.ray.get_group("train")      # an actorcc.Communicator
    comm.all_reduce(tensor)

create_group makes one UniqueId on the driver (the group's root runs in the driver process
for the group's whole life: if the driver exits, every actor's calls on the group fail at
once with RemoteError), then every actor joins concurrently through
``actor.__ray_call__`` (which Ray adds to every actor class), so actors may start in any order
and seconds apart. It returns when all have joined, or raises GroupJoinError naming the actors
that did not (dead, busy, or unable to join) and what every other one reported.

Elastic groups (docs/elastic.md, "Ray"): when an actor dies, the others' calls raise naming
its rank; they call ``actorcc.ray.shrink_group(name)`` and go on without it. An actor Ray
restarts (max_restarts > 0) calls ``actorcc.ray.rejoin_group(name)`` in its constructor, and the
members' next ``actorcc.ray.grow_group(name)`` takes it back at its original rank (the
membership lives in Ray's KV store). The same for ray.util.collective groups:
``shrink_collective_group``, ``rejoin_collective_group``, ``grow_collective_group``.

actorcc's libnccl.so.2 (NCCL's C API on actorcc) in actors, so their torch "nccl" groups, vLLM
and CuPy use actorcc unchanged (docs/nccl-use.md):

    actor = Trainer.options(runtime_env=actorcc.ray.nccl_runtime_env({...your runtime_env...})).remote()

ray.util.collective (Ray versions with ``register_collective_backend``):

    actorcc.ray.register_backend()           # in the driver, and in every actor (or:)
    actorcc.ray.create_collective_group(actors, group_name="g")   # does both, from the driver
    # inside actors: ray.util.collective.allreduce(tensor, group_name="g"), etc.

or the Ray-native flow: each actor calls ``actorcc.ray.register_backend()`` then
``ray.util.collective.init_collective_group(world, rank, backend="ACTORCC", group_name=...)``
(rank 0 publishes the UniqueId through a named actor); ``ray.util.collective.
create_collective_group(..., backend="ACTORCC")`` from the driver works as well once the
backend is registered in the actors (``register_backend_on(actors)``).

Layout: groups.py (create_group and the groups it forms: joins, GroupJoinError, get_group,
destroy_group, their shrink/grow/rejoin, run_on, doctor), collective.py (the ray.util.collective
backend "ACTORCC" and its groups' elastic steps), elastic.py (the elastic membership kept in Ray's
KV store, for both kinds of group), uid_store.py (a UniqueId handed over through Ray's KV store),
runtime_env.py (nccl_runtime_env), direct_transport.py (the Ray Direct Transport "ACTORCC";
transport_manager.py is its TensorTransportManager, imported only when the transport is
registered, since it needs ray).
"""
from __future__ import annotations

from .._actorcc import Error, InvalidArgumentError, UniqueId  # noqa: F401
from ..communicator import Communicator  # noqa: F401
from .collective import (BACKEND_NAME, create_collective_group, grow_collective_group, register_backend,
                         register_backend_on, rejoin_collective_group, shrink_collective_group)
from .direct_transport import register_tensor_transport  # noqa: F401 - Ray Direct Transport "ACTORCC"
from .groups import (NOTICE_AFTER_S, GroupJoinError, create_group, destroy_group, doctor, get_group,  # noqa: F401
                     group_members, grow_group, rejoin_group, run_on, shrink_group)
from .runtime_env import nccl_runtime_env

__all__ = [
    "create_group", "get_group", "destroy_group", "GroupJoinError", "register_backend",
    "register_backend_on", "create_collective_group", "BACKEND_NAME", "doctor", "nccl_runtime_env",
    "shrink_group", "grow_group", "rejoin_group", "group_members",
    "shrink_collective_group", "grow_collective_group", "rejoin_collective_group",
]
