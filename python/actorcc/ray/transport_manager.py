"""The TensorTransportManager behind actorcc.ray.direct_transport (Ray 2.60, ray/experimental/rdt/).

Shape of a transfer, as Ray orchestrates a two-sided transport: the driver (the objects' owner)
calls get_communicator_metadata(src, dst); Ray then runs send_multiple_tensors in the source
actor and recv_multiple_tensors in the destination, both on the actors' "_ray_system" thread, and
on a failure abort_transport in both (on the "_ray_system_error" thread, so it can end a transfer
that is blocked).

Pair groups: every pair of actors that exchange objects gets one two-rank actorcc group per
device type, rank 0 being the actor with the smaller actor id. The driver hands out only a pair
token (made once per pair); the group itself is formed by the actors in their first transfer:
rank 0 makes the UniqueId (its root lives in rank 0, so the group's life is the pair's) and
publishes it in Ray's KV store under the token, rank 1 reads it. A group that failed (the peer
died, an abort) is dropped by each side when it notices, and the next transfer forms a new one
under the same token, so nothing on the driver has to learn about failures.
"""
from __future__ import annotations

import collections
import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import List, Optional

import ray
from ray.experimental.rdt.tensor_transport_manager import (
    CommunicatorMetadata,
    TensorTransportManager,
    TensorTransportMetadata,
)

from .._actorcc import Error, InvalidArgumentError, RemoteError
from . import uid_store as _store
from ..communicator import Communicator, P2POp
from .direct_transport import TRANSPORT_NAME

logger = logging.getLogger(__name__)

# Defaults of register(): a transfer between live actors never needs minutes, and a stuck one
# must end well before Ray's own RDT fetch timeout (RAY_rdt_fetch_fail_timeout_milliseconds).
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_JOIN_TIMEOUT_S = 60.0
_ERRORS_KEPT = 100

_options = {"timeout": DEFAULT_TIMEOUT_S, "join_timeout": DEFAULT_JOIN_TIMEOUT_S}


@dataclass
class ActorccTransportMetadata(TensorTransportMetadata):
    """Shapes and dtypes of the object's tensors (as Ray's collective transports)."""


@dataclass
class ActorccCommunicatorMetadata(CommunicatorMetadata):
    """Which pair group a transfer uses. names/actor_ids: the pair's two actors by pair rank."""

    token: str = ""
    src_rank: int = 0
    dst_rank: int = 1
    names: List[str] = field(default_factory=list)
    actor_ids: List[str] = field(default_factory=list)
    timeout: float = DEFAULT_TIMEOUT_S
    join_timeout: float = DEFAULT_JOIN_TIMEOUT_S


def register(timeout=None, join_timeout=None):
    import torch
    from ray.experimental.rdt import util

    if timeout is not None:
        _options["timeout"] = float(timeout)
    if join_timeout is not None:
        _options["join_timeout"] = float(join_timeout)
    info = util.transport_manager_info.get(TRANSPORT_NAME)
    if info is None:
        ray.experimental.register_tensor_transport(TRANSPORT_NAME, ["cuda", "cpu"], ActorccTensorTransport,
                                                   torch.Tensor)
    elif info.transport_manager_class is not ActorccTensorTransport:
        raise InvalidArgumentError(f"Ray tensor transport {TRANSPORT_NAME!r} is already registered with "
                                   f"{info.transport_manager_class.__name__}")
    return TRANSPORT_NAME


# ---- state of this process --------------------------------------------------------------------

_lock = threading.Lock()
_pairs = {}       # driver: (actor id, actor id) sorted -> token
_groups = {}      # actors: (token, device type) -> _PairGroup
_errors = collections.deque(maxlen=_ERRORS_KEPT)


class _PairGroup:
    def __init__(self, comm, meta, rank):
        self.comm, self.rank = comm, rank
        self.peer = meta.names[1 - rank]
        self.uid = None
        self.aborted_by_ray = False  # abort_transport ended it: the fault is the peer's side


def transfer_errors():
    with _lock:
        return list(_errors)


def pair_groups():
    with _lock:
        return {g.uid: {"rank": g.rank, "peer": g.peer} for g in _groups.values()}


def _actor_name(actor):
    return f"{actor._ray_actor_creation_function_descriptor.class_name.rsplit('.', 1)[-1]}" \
           f"(actor id {actor._actor_id.hex()})"


def _describe(name, actor_id):
    """`name` with what Ray's actor table says of it when it is not alive (dead, restarting)."""
    try:
        from ray._private import state
        st = (state.actors(actor_id) or {}).get("State")
    except Exception:  # noqa: BLE001 - another Ray: the name alone
        st = None
    return f"{name} ({'dead' if st == 'DEAD' else st.lower()})" if st and st != "ALIVE" else name


def _device_of(meta):
    return "cuda" if (meta.tensor_device or "cpu").startswith("cuda") else "cpu"


def _group(cmeta, device, rank):
    """This actor's pair group for `device`: a healthy one it holds, else a new one (formed with
    the peer, which does the same in its part of this transfer)."""
    key = (cmeta.token, device)
    with _lock:
        g = _groups.get(key)
    if g is not None:
        try:
            g.comm.check()
            return g
        except Error:
            _drop(key, g)  # failed earlier (the peer died, an abort): form a new one
    store_key = f"rdt:{cmeta.token}:{device}"
    if rank == 0:
        uid = _store.publish(store_key, ray.util.get_node_ip_address())
    else:
        uid = _store.wait(store_key, cmeta.join_timeout, f"Ray tensor transport {TRANSPORT_NAME}: {cmeta.names[0]}",
                          take=True)
    if device == "cuda":
        import torch
        dev, backend = torch.cuda.current_device(), "cuda"
    else:
        dev, backend = "cpu", "cpu"
    comm = Communicator(uid, rank, 2, device=dev, backend=backend, timeout=cmeta.timeout,
                        join_timeout=cmeta.join_timeout)
    g = _PairGroup(comm, cmeta, rank)
    g.uid = uid
    with _lock:
        _groups[key] = g
    return g


def _drop(key, g):
    with _lock:
        if _groups.get(key) is g:
            del _groups[key]
    try:
        g.comm.close()
    except Error:
        pass


def _as_bytes(t):
    """A flat uint8 view of `t` (contiguous): bytes move as they are, whatever the dtype."""
    import torch
    return t.reshape(-1).view(torch.uint8)


def _transfer(comm, ops):
    """Runs the pair's sends or receives as one batch (the point tests wrap to kill mid-call)."""
    comm.batch_send_recv(ops)


def _run(obj_id, role, tensors, tmeta, cmeta):
    device = _device_of(tmeta)
    rank = cmeta.src_rank if role == "send" else cmeta.dst_rank
    peer = 1 - rank
    key = (cmeta.token, device)
    g = None
    try:
        g = _group(cmeta, device, rank)
        ops = [P2POp(role, _as_bytes(t), peer) for t in tensors if t.numel() > 0]
        if ops:
            _transfer(g.comm, ops)
        if device == "cuda":
            import torch
            g.comm.synchronize(torch.cuda.current_stream())
    except Error as e:
        if g is not None:
            _drop(key, g)
        err = _named(e, obj_id, role, cmeta, peer, g is not None and g.aborted_by_ray)
        with _lock:
            _errors.append({"object": obj_id, "role": role, "peer": cmeta.names[peer], "error": str(err),
                            "time": time.time()})
        logger.warning("%s", err)
        raise err from e


def _named(e, obj_id, role, cmeta, peer, aborted_by_ray):
    """The transfer's error, naming the peer actor when the peer is at fault (it died, closed,
    timed out, aborted the transfer, or Ray aborted this side because the peer's failed), else
    this actor."""
    culprit = getattr(e, "culprit", -1)
    who = peer if aborted_by_ray or culprit in (-1, peer) else 1 - peer
    name = _describe(cmeta.names[who], cmeta.actor_ids[who])
    way = f"to {cmeta.names[peer]}" if role == "send" else f"from {cmeta.names[peer]}"
    what = f"object {obj_id}" if obj_id else "an object"
    err = RemoteError(f"actorcc Ray tensor transport: the {role} of {what} {way} failed because of "
                      f"{name}: {e}")
    err.code = getattr(e, "code", "remote")
    err.rank = err.culprit = who
    err.culprits = [who]
    err.observer_rank = 1 - peer
    err.actor_id = cmeta.actor_ids[who]
    return err


class ActorccTensorTransport(TensorTransportManager):
    def tensor_transport_backend(self) -> str:
        return TRANSPORT_NAME

    @staticmethod
    def is_one_sided() -> bool:
        return False

    @staticmethod
    def can_abort_transport() -> bool:
        # abort() ends a blocked call on both ranks at once, so Ray need not kill the actors.
        return True

    def actor_has_tensor_transport(self, actor) -> bool:
        # Pair groups are formed on demand by the transfers themselves: any actor can take part.
        return hasattr(actor, "__ray_call__")

    def extract_tensor_transport_metadata(self, obj_id, rdt_object) -> ActorccTransportMetadata:
        meta, device = [], None
        for t in rdt_object:
            if device is None:
                device = t.device
            elif t.device.type != device.type:
                raise InvalidArgumentError(f"Ray tensor transport {TRANSPORT_NAME}: the tensors of one object must be "
                                           f"on one device type (found {device.type} and {t.device.type})")
            meta.append((t.shape, t.dtype))
        return ActorccTransportMetadata(tensor_meta=meta, tensor_device=device.type if device else None)

    def get_communicator_metadata(self, src_actor, dst_actor, backend: Optional[str] = None):
        if src_actor is None:
            raise InvalidArgumentError(f"Ray tensor transport {TRANSPORT_NAME}: the source must be an actor")
        ends = sorted([(src_actor._actor_id.hex(), src_actor), (dst_actor._actor_id.hex(), dst_actor)],
                      key=lambda x: x[0])
        ids = [i for i, _ in ends]
        with _lock:
            token = _pairs.get(tuple(ids))
            if token is None:
                token = _pairs[tuple(ids)] = f"{os.getpid()}-{secrets.token_hex(8)}"
        src_rank = ids.index(src_actor._actor_id.hex())
        return ActorccCommunicatorMetadata(
            token=token, src_rank=src_rank, dst_rank=1 - src_rank, names=[_actor_name(a) for _, a in ends],
            actor_ids=ids, timeout=_options["timeout"], join_timeout=_options["join_timeout"])

    def send_multiple_tensors(self, tensors, tensor_transport_metadata, communicator_metadata):
        _run(None, "send", [t.contiguous() for t in tensors], tensor_transport_metadata, communicator_metadata)

    def recv_multiple_tensors(self, obj_id, tensor_transport_metadata, communicator_metadata, target_buffers=None):
        import torch
        device = tensor_transport_metadata.tensor_device or "cpu"
        if device == "cuda":
            device = f"cuda:{torch.cuda.current_device()}"
        tensors = [b if b is not None else torch.empty(shape, dtype=dtype, device=device)
                   for b, (shape, dtype) in zip(target_buffers or [None] * len(tensor_transport_metadata.tensor_meta),
                                                tensor_transport_metadata.tensor_meta)]
        _run(obj_id, "recv", tensors, tensor_transport_metadata, communicator_metadata)
        return tensors

    def garbage_collect(self, obj_id, tensor_transport_meta, tensors):
        # Nothing is registered per object (no pinned or registered memory): the pair groups
        # outlive objects, and Ray frees the tensors themselves.
        pass

    def abort_transport(self, obj_id, communicator_metadata):
        """Ends this actor's transfer of `obj_id` (Ray: the other side failed or timed out): the
        pair group is aborted, so the blocked call here and the peer's both raise."""
        cm = communicator_metadata
        lost = [_describe(n, i) for n, i in zip(cm.names, cm.actor_ids)]
        reason = f"Ray aborted the transfer of object {obj_id} between {lost[0]} and {lost[1]}"
        with _lock:
            groups = [g for (token, _), g in _groups.items() if token == cm.token]
        for g in groups:
            g.aborted_by_ray = True
            g.comm.abort(reason)
