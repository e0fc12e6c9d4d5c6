"""actorcc as a Ray Direct Transport (Ray 2.60's ray.experimental.register_tensor_transport).

In the driver, before the actors are created:

    import actorcc.ray
    actorcc.ray.register_tensor_transport()          # registers the name "ACTORCC"

    @ray.remote(enable_tensor_transport=True)
    class Trainer:
        @ray.method(tensor_transport="ACTORCC")
        def weights(self):
            return {"w": self.w}                     # tensors stay in this actor ...

    rollout.load.remote(trainer.weights.remote())    # ... and go to the rollout actor over actorcc

Nothing else is set up: no collective group is created by the user. The first transfer between
two actors forms a two-rank actorcc group of that pair (its UniqueId made in the driver, its root
living in the driver process, both actors joining inside that transfer); later transfers between
them reuse it. CPU and CUDA tensors, any dtype (bytes are moved as they are).

Failures: a peer that dies mid-transfer fails the other side's transfer within seconds, with an
error naming the dead actor (its class and actor id) and the object; the surviving actor keeps
serving (Ray calls abort_transport instead of killing both actors, as it does for its own NCCL
and GLOO transports). The pair group that failed is dropped and the next transfer between the
same actors forms a new one. The sender's side of a failed transfer is not seen by Ray's caller:
actorcc.ray.direct_transport.transfer_errors() (in that actor; also actorcc.ray_transport) lists it.

Importing this module does not import ray.
"""
from __future__ import annotations

TRANSPORT_NAME = "ACTORCC"

__all__ = ["register_tensor_transport", "transfer_errors", "pair_groups", "TRANSPORT_NAME"]


def register_tensor_transport(*, timeout=None, join_timeout=None):
    """Registers actorcc as the Ray Direct Transport "ACTORCC" (devices cuda and cpu, torch
    tensors) in this process; call it in the driver before creating the actors that use it (Ray
    registers it in each of them when they first exchange objects). Idempotent.

    timeout: seconds bounding each wait inside a transfer (default 60): a peer that stops without
    dying fails the transfer after it. join_timeout: how long the two actors of a new pair may
    take to meet (default 60). Returns the name to pass to @ray.method(tensor_transport=...)."""
    from . import transport_manager as M
    return M.register(timeout=timeout, join_timeout=join_timeout)


def transfer_errors():
    """In an actor: the transfers of this process that failed, oldest first, as
    [{"object": id, "role": "send" | "recv", "peer": actor description, "error": text}] (the last
    100). Ray reports a failed receive to the task that uses the object; a failed send it does not
    report at all, so this is where a trainer finds out which rollout actor it lost."""
    from . import transport_manager as M
    return M.transfer_errors()


def pair_groups():
    """In an actor: the actorcc pair groups this process holds for the transport,
    {UniqueId text: {"rank": r, "peer": actor description}}."""
    from . import transport_manager as M
    return M.pair_groups()
