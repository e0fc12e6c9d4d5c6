"""torch.distributed backend "actorcc".

    import actorcc.torch                      # registers the backend (idempotent)
    torch.distributed.init_process_group("actorcc", ...)   # instead of "nccl" / "gloo"

Any init_method torch supports (env://, tcp://, a TCPStore passed as store=); also
"cpu:gloo,cuda:actorcc". Subgroups (new_group) work the same way. The process group is a Python
ProcessGroup (as torch's test_c10d_pypg builds one): every call goes straight to an
actorcc.Communicator, so the C++ c10d machinery adds nothing to an actorcc call but the
Python dispatch. all_reduce of one tensor has a hot path straight into the extension with
raw arguments (docs/torch.md has the per-call figures); under CUDA-graph capture every call
is a captured kernel and wait() a captured stream dependency.

How it maps onto actorcc:
- One actorcc communicator per device type the group is used with (CPU tensors: the CPU
  backend; CUDA tensors: the CUDA backend on the current device): rank 0 creates its UniqueId
  and hands it over through the group's store, so nothing else is needed to form it. Where the
  group's device is known when it is created (device_id given to init_process_group, which
  new_group inherits; or a process without CUDA: only CPU tensors can come), init_process_group
  and new_group form it, as NCCL's backend does given a device_id, and the first call costs
  what the others do; otherwise the first call with such tensors forms it (the ranks of a group
  make their calls in the same order).
- Work objects (work.py): CPU calls run on one worker thread per group in issue
  order, as gloo's do (async_op=True and DDP's bucket all-reduces overlap the caller), except a
  blocking call finding nothing queued, which runs in the caller's thread; CUDA
  calls are enqueued on the caller's current stream (where NCCL's backend uses its own stream
  and makes the current one wait); the result is ordered after the call on that stream either
  way, and wait() orders the stream current at wait() after it, as NCCL's does. A failed
  call's error (a peer that died, stalled past the timeout, aborted or made a mismatched call,
  each named) is raised by its Work's wait() and is_completed() and is the exception of its
  future, which DDP's comm hooks chain on; a CUDA future completes when the call is enqueued
  (as NCCL's), and what the kernels find later is the communicator's error, raised by wait(),
  is_completed() and every later call.
- "cpu:gloo,cuda:actorcc": torch replaces the whole group by a Python ProcessGroup that a
  backend creator returns (its other devices' backends are dropped), so this group routes CPU
  tensors itself: where the group's backend string maps "cpu" to another backend, the first
  call with CPU tensors creates that backend (gloo) over the group's store and every call with
  CPU tensors goes there; CUDA tensors stay on actorcc.
- batch_isend_irecv: the group says it coalesces, so torch hands it the whole batch, which
  runs as one actorcc batch_send_recv (any pattern completes); plain send/recv block.
- torch versions: 2.5 to 2.11 and 2.15 (docs/torch.md has the table). register_backend(name,
  fn, devices=...) is the same in all, and a repeated registration is skipped. Before 2.7 torch
  keeps only the C++ half of a Work returned to it (see work._KEPT).
- torch.distributed.shrink_group (2.11, 2.15) needs a C++ Backend and cannot reach this Python
  group: shrink_group(group, exclude) (shrink.py) is the alternative (docs/torch.md).
- Supported: allreduce (and coalesced), allgather / all_gather_into_tensor (and coalesced),
  reduce_scatter / reduce_scatter_tensor (and coalesced), broadcast, reduce, barrier, send,
  recv, alltoall / alltoall_base (all_to_all_single, with splits), gather, scatter. Reduce ops
  SUM, PRODUCT, MIN, MAX, AVG (PREMUL_SUM is refused). Dtypes: those torch's NCCL backend takes,
  with its semantics (bool reductions as logical or / and, float8 moved as bytes, complex as its
  real view: dtypes.py); the rest is refused with a TypeError, as there. Send/recv
  tags must be 0. A call refused here (another op, a dtype, a tag, several tensors per process)
  is refused through the group, as the communicator refuses a bad argument: the others' calls
  raise at once, naming this rank.

Layout: process_group.py (ActorccProcessGroup: its communicators, refusals, collectives,
suspend/resume), p2p.py (send/recv, batch_isend_irecv and the deferred isend/irecv), work.py
(the Work objects and the CPU call queue), dtypes.py (the dtypes taken and how each goes to
actorcc), shrink.py (shrink_group), backend.py (register and the creator torch calls: the
ranks' meeting in the store, the world-size verdicts, the communicator formed at creation),
_args.py (what the calls read from torch's arguments). Importing this package imports torch
and registers the backend.
"""
from __future__ import annotations

from .._actorcc import InvalidArgumentError, UniqueId, UnsupportedError  # noqa: F401
from ..communicator import Communicator  # noqa: F401
from .backend import register
from .process_group import BACKEND_NAME, ActorccProcessGroup
from .shrink import shrink_group
from .work import DeviceWork, DoneWork, HostQueue, HostWork, current_stream, record_event  # noqa: F401
# Private helpers callers and tests reach through this package (a patch must go to the module
# that defines them: actorcc.torch.backend).
from .backend import _create, _create_from, _eager_device  # noqa: F401
from .process_group import _timeout_of  # noqa: F401

__all__ = ["BACKEND_NAME", "register", "ActorccProcessGroup"]

register()
