"""actorcc: collective communication for GPU actors.

    import actorcc
    uid = actorcc.UniqueId.create()            # once (its root runs in this process)
    comm = actorcc.Communicator(uid, rank, world_size)   # on every rank, any order
    comm.all_reduce(tensor)                    # torch / cupy / jax / numpy, via DLPack

Errors: actorcc.Error and its subclasses InvalidArgumentError (also ValueError),
TimeoutError (also the builtin TimeoutError), RemoteError (.rank = the failed rank),
SystemCallError (also OSError), CudaError, UnsupportedError, InternalError.
Every error has .culprit: the rank at fault when known (the rank a timed-out wait waited for,
the rank that died, left, refused or disagreed, even when another rank reported it), else -1;
.observer_rank is the rank that raised it; .culprits lists every rank known lost when it was
raised (ranks killed together: all of those the root reported), the culprit included.
Ray: see actorcc.ray (create_group, the ray.util.collective backend).
"""
from ._actorcc import (  # noqa: F401
    CudaError,
    Error,
    InternalError,
    InvalidArgumentError,
    RemoteError,
    SystemCallError,
    TimeoutError,
    UniqueId,
    UnsupportedError,
    built_with_cuda,
)
from ._actorcc import version as _library_version
from ._tensors import SUPPORTED_DTYPES  # noqa: F401
from .communicator import Communicator, P2POp, Work  # noqa: F401

__version__ = _library_version()

# actorcc.doctor(comm) runs the doctor in a group; the module is light (no torch import).
from . import doctor  # noqa: E402,F401

# TimeoutError is left out of __all__ so `from actorcc import *` does not shadow the builtin.
__all__ = [
    "UniqueId", "Communicator", "Work", "Error", "InvalidArgumentError", "RemoteError",
    "SystemCallError", "CudaError", "UnsupportedError", "InternalError", "SUPPORTED_DTYPES",
    "built_with_cuda", "doctor", "P2POp",
]
