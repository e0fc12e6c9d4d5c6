"""Work: the handle an async_op=True call of actorcc.Communicator returns, and the framework
event a CUDA call's Work waits on. A module of its own so that the communicator and its
collective calls (actorcc.collectives) both build Works without importing each other.
"""
from __future__ import annotations

from . import _tensors as T

__all__ = ["Work", "record_event"]


class Work:
    """Handle of an async_op=True call. wait() blocks until the result is ready and returns
    it (re-raising the call's error); is_completed() polls. On the CUDA backend both raise the
    communicator's error once the call's kernel has finished, if it gave up (a peer stopped
    calling, the group was aborted, the ranks disagreed): the output is then incomplete."""

    __slots__ = ("_future", "_event", "_result", "_check")

    def __init__(self, result, future=None, event=None, check=None):
        self._result = result
        self._future = future
        self._event = event
        self._check = check  # the communicator's check(), for device-side failures

    def wait(self, timeout=None):
        if self._future is not None:
            self._future.result(timeout)
        elif self._event is not None:
            self._event.synchronize()
        if self._check is not None:
            self._check()
        return self._result

    def is_completed(self):
        if self._future is not None:
            return self._future.done()
        done = self._event is None or bool(self._event.query())
        if done and self._check is not None:
            self._check()
        return done

    def result(self, timeout=None):
        return self.wait(timeout)

    def exception(self, timeout=None):
        """The call's exception (None if it succeeded); CPU backend only."""
        return self._future.exception(timeout) if self._future is not None else None


def record_event(tensor, stream):
    """A framework event recorded on `stream` (CUDA), or None where the tensor's framework
    has none we can use (the Work then reports completion at once)."""
    if T.is_torch(tensor):
        torch = T._torch
        ev = torch.cuda.Event()
        ev.record(torch.cuda.ExternalStream(stream, device=tensor.device))
        return ev
    if T.module_root(tensor) == "cupy":
        import cupy
        ev = cupy.cuda.Event()
        ev.record(cupy.cuda.ExternalStream(stream))
        return ev
    return None
