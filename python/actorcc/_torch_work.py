"""The torch backend's Work objects and its CPU call queue (actorcc.torch).

A torch Work is the only place torch (DDP's reducer, FSDP2, a user's async_op=True) learns how
a call went, so every Work here reports the call's error: wait() and is_completed() raise it,
and the future that DDP's comm hooks chain on completes with it as its exception.

- CPU calls run on one worker thread per group (HostQueue), in issue order, as gloo's do: the
  caller goes on (DDP overlaps its all-reduces with the backward pass), and the call's error is
  kept for its Work (HostWork). A peer that stalls, dies or refuses the call makes the
  communicator raise there, naming that rank, within the group's timeout.
- CUDA calls are enqueued on the caller's current stream (DeviceWork). As with the NCCL
  backend, the future completes when the call is enqueued and wait() orders the current stream
  after the call; what the kernels found after that (a peer that stopped calling, an abort) is
  the communicator's error, which wait(), is_completed() and every later call raise (check()).
"""
from __future__ import annotations

import collections
import concurrent.futures
import datetime

import torch
import torch.distributed as dist

_TorchWork = dist._Work if hasattr(dist, "_Work") else dist.Work

# torch before 2.7 keeps only the C++ half of a Work that Python code returned to it: once the
# Python object is gone, C++ calls to wait() and get_future() reach c10d::Work's own methods,
# and its wait() blocks forever on a completion flag nothing sets (DDP's constructor waits so in
# verify_params_across_processes). There, the last Works made stay alive: C++ waits on a Work
# or takes its future right after the call that made it.
_VERSION = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
_KEPT = collections.deque(maxlen=64) if _VERSION < (2, 7) else None


def _seconds(timeout):
    if timeout is None:
        return None
    s = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else float(timeout)
    return s if s > 0 else None  # torch passes timedelta(0) (or kNoTimeout) for "no timeout"


class _Work(_TorchWork):
    """Common state: the call's output tensors (result()) and the torch future DDP reads.

    The future torch gets is a then() of a private one: torch reads it in C++ (DDP's reducer
    takes its value), and only a failing callback makes a torch future fail there, whereas
    Future.set_exception stores the exception as the value (which DDP would take for its
    gradients)."""

    def __init__(self, result):
        super().__init__()
        self._result = result
        self._error = None
        self._source = torch.futures.Future()
        self._future = self._source.then(self._outcome)
        if _KEPT is not None:
            _KEPT.append(self)

    def _outcome(self, _):
        if self._error is not None:
            raise self._error
        return self._result

    def _complete(self, error=None):
        """The call is done (error: why it failed, or None); runs the future's callbacks."""
        self._error = error
        self._source.set_result(None)

    def result(self):
        return self._result

    def get_future(self):
        return self._future


class DoneWork(_Work):
    """A call with nothing left to wait for (an empty batch, a barrier with no communicator)."""

    def __init__(self, result):
        super().__init__(result)
        self._complete()

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def is_success(self):
        return True


class HostWork(_Work):
    """A CPU call on the group's HostQueue: wait() blocks until it ran and raises its error."""

    def __init__(self, result, rank):
        super().__init__(result)
        self._rank = rank
        self._done = None  # the queue's concurrent future, once the call is submitted

    def _start(self, done):
        self._done = done


    def wait(self, timeout=None):
        try:
            self._done.result(_seconds(timeout))
        except concurrent.futures.TimeoutError:
            if self._done.done():  # the call's own timeout (the same class since Python 3.11)
                raise
            raise TimeoutError(f"actorcc torch backend: rank {self._rank}: Work.wait(timeout={timeout}) "
                               "returned before the call completed") from None
        return True

    def is_completed(self):
        if self._done is None or not self._done.done():
            return False
        exc = self._done.exception()
        if exc is not None:
            raise exc
        return True

    def is_success(self):
        return self._done is not None and self._done.done() and self._done.exception() is None

    def exception(self):
        return self._done.exception() if self._done is not None and self._done.done() else None


class HostQueue:
    """The one worker thread that runs a group's CPU calls in issue order."""

    def __init__(self, rank):
        self._rank = rank
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"actorcc-torch-r{rank}")

    def submit(self, call, works):
        """Runs call() on the queue; each of `works` (HostWork) completes with its outcome."""
        def run():
            try:
                call()
            except BaseException as e:  # noqa: BLE001 - handed to every Work of the call
                for w in works:
                    w._complete(e)
                raise
            for w in works:
                w._complete()

        done = self._pool.submit(run)
        for w in works:
            w._start(done)
        return done

    def shutdown(self):
        self._pool.shutdown(wait=True)


class DeviceWork(_Work):
    """A CUDA call enqueued on the caller's stream (event recorded after it)."""

    def __init__(self, result, device, check):
        super().__init__(result)
        self._stream = torch.cuda.current_stream(device)  # the one the call was enqueued on
        self._event = torch.cuda.Event()
        self._event.record(self._stream)
        self._check = check
        self._complete()

    def wait(self, timeout=None):
        cur = torch.cuda.current_stream(self._stream.device)
        if cur != self._stream:
            cur.wait_event(self._event)
        self._check()
        return True

    def is_completed(self):
        done = bool(self._event.query())
        if done:
            self._check()
        return done

    def is_success(self):
        try:
            return self.is_completed()
        except Exception:  # noqa: BLE001 - is_success reports, it does not raise
            return False
