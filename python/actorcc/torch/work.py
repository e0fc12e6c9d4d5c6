"""The torch backend's Work objects and its CPU call queue (actorcc.torch).

A torch Work is the only place torch (DDP's reducer, FSDP2, a user's async_op=True) learns how
a call went, so every Work here reports the call's error: wait() and is_completed() raise it,
and the future that DDP's comm hooks chain on completes with it as its exception.

- CPU calls with async_op run on one worker thread per group (HostQueue), in issue order, as
  gloo's do: the caller goes on (DDP overlaps its all-reduces with the backward pass), and the
  call's error is kept for its Work (HostWork). A blocking call finding the queue idle runs in
  the caller's thread (no thread hop); its Work, complete, raises its error the same way. A
  peer that stalls, dies or refuses the call makes the communicator raise there, naming that
  rank, within the group's timeout.
- CUDA calls are enqueued on the caller's current stream (DeviceWork). As with the NCCL
  backend, the future completes when the call is enqueued and wait() orders the current stream
  after the call; what the kernels found after that (a peer that stopped calling, an abort) is
  the communicator's error, which wait(), is_completed() and every later call raise (check()).
- Per call, a Work is one small object: no future until get_future() asks for one, no thread
  pool future, no CUDA event for a blocking call (torch waits on it at once on the same stream).
"""
from __future__ import annotations

import _thread
import atexit
import collections
import datetime
import queue
import threading
import weakref

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
    """Common state: the call's output tensors (result()). Nothing else is made per call: the
    future torch asks for (get_future) is made when it is asked for."""

    def __init__(self, result):
        super().__init__()
        self._result = result
        if _KEPT is not None:
            _KEPT.append(self)

    def result(self):
        return self._result


def _future(work):
    """(source, future) for `work`: the future torch gets is a then() of a private one: torch
    reads it in C++ (DDP's reducer takes its value), and only a failing callback makes a torch
    future fail there, whereas Future.set_exception stores the exception as the value (which
    DDP would take for its gradients). source.set_result(None) completes it with the work's
    outcome (work._error raised, else work._result)."""
    def outcome(_):
        if work._error is not None:
            raise work._error
        return work._result
    source = torch.futures.Future()
    return source, source.then(outcome)


class DoneWork(_Work):
    """A call with nothing left to wait for (an empty batch, a barrier with no communicator)."""

    _error = None

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def is_success(self):
        return True

    def get_future(self):
        source, fut = _future(self)
        source.set_result(None)
        return fut


_PENDING = object()  # HostWork: the call has not run yet

# Guards a HostWork's future against its call completing on the queue's thread meanwhile.
_FUTURE_LOCK = threading.Lock()


class HostWork(_Work):
    """A CPU call: wait() blocks until it ran (on the group's HostQueue, or already in the
    caller's thread) and raises its error."""

    def __init__(self, result, rank, error=_PENDING):
        """error: the outcome of a call that already ran (None: it succeeded); by default the
        call is still to run, and _complete() tells its outcome."""
        super().__init__(result)
        self._rank = rank
        self._source = self._future = None
        if error is _PENDING:
            self._done, self._error = False, None
            self._ran = _thread.allocate_lock()  # held until the call ran
            self._ran.acquire()
        else:
            self._done, self._error, self._ran = True, error, None

    def _complete(self, error=None):
        """The call is done (error: why it failed, or None); runs the future's callbacks."""
        self._error = error
        with _FUTURE_LOCK:
            self._done = True
            source = self._source
        self._ran.release()
        if source is not None:
            source.set_result(None)

    def get_future(self):
        with _FUTURE_LOCK:
            if self._future is None:
                self._source, self._future = _future(self)
                if not self._done:
                    return self._future
            else:
                return self._future
        self._source.set_result(None)
        return self._future

    def wait(self, timeout=None):
        if not self._done:
            s = _seconds(timeout)
            if not self._ran.acquire(True, -1 if s is None else s):
                raise TimeoutError(f"actorcc torch backend: rank {self._rank}: Work.wait(timeout={timeout}) "
                                   "returned before the call completed")
            self._ran.release()
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self):
        if not self._done:
            return False
        if self._error is not None:
            raise self._error
        return True

    def is_success(self):
        return self._done and self._error is None

    def exception(self):
        return self._error if self._done else None


class HostQueue:
    """The one worker thread that runs a group's CPU calls in issue order. A blocking call
    (torch waits on its Work at once) finding the queue idle runs in the caller's thread
    instead (run_here): no thread hop, as gloo's blocking calls."""

    def __init__(self, rank):
        self._rank = rank
        self._items = queue.SimpleQueue()
        self._submitted = 0  # written by the caller's thread only
        self._finished = 0  # written by the worker only
        self._thread = None

    def idle(self):
        """Nothing queued or running (only the thread that submits may ask)."""
        return self._submitted == self._finished

    def submit(self, call, works):
        """Runs call() on the queue; each of `works` (HostWork) completes with its outcome."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=f"actorcc-torch-r{self._rank}", daemon=True)
            self._thread.start()
            _LIVE.add(self)
        self._submitted += 1
        self._items.put((call, works))

    def run_here(self, call, result):
        """Runs call() now in this thread; its HostWork, complete, carries its error."""
        try:
            call()
        except Exception as e:  # noqa: BLE001 - raised by the Work, as a queued call's
            return HostWork(result, self._rank, e)
        return HostWork(result, self._rank, None)

    def _loop(self):
        while True:
            item = self._items.get()
            if item is None:
                return
            call, works = item
            error = None
            try:
                call()
            except BaseException as e:  # noqa: BLE001 - handed to every Work of the call
                error = e
            self._finished += 1
            for w in works:
                w._complete(error)

    def shutdown(self):
        if self._thread is not None:
            self._items.put(None)
            self._thread.join()
            self._thread = None


# Queues with a thread: at interpreter exit their queued calls finish first (as a thread
# pool's do), before the threads of the interpreter are stopped.
_LIVE = weakref.WeakSet()


def _finish_queues():
    for q in list(_LIVE):
        q.shutdown()


getattr(threading, "_register_atexit", atexit.register)(_finish_queues)


# The torch.cuda.Stream of each current stream, by torch's (stream id, device, device type)
# key: torch.cuda.current_stream() builds a new Python object every call (microseconds);
# torch never destroys a stream it handed out (they are pooled), so the objects stay valid.
_STREAMS = {}
_current_stream_key = getattr(torch._C, "_cuda_getCurrentStream", None)


def current_stream(device):
    """(torch.cuda.Stream, raw cudaStream_t) current on CUDA device index `device`."""
    if _current_stream_key is None:  # a torch without the private call
        s = torch.cuda.current_stream(device)
        return s, s.cuda_stream
    key = _current_stream_key(device)
    hit = _STREAMS.get(key)
    if hit is None:
        s = torch.cuda.Stream(stream_id=key[0], device_index=key[1], device_type=key[2])
        hit = _STREAMS[key] = (s, s.cuda_stream)
    return hit


class DeviceWork(_Work):
    """A CUDA call enqueued on the caller's current stream. With an event (async_op calls,
    where the caller may wait from another stream or poll), the event is recorded after the
    call; a blocking call (torch waits on it at once, on the same stream) records none.
    Nothing here synchronises the host: under CUDA-graph capture, wait() is a stream
    dependency captured into the graph."""

    _error = None

    def __init__(self, result, device, stream, check, event):
        super().__init__(result)
        self._device = device
        self._stream = stream  # the torch.cuda.Stream the call was enqueued on
        self._event = event
        self._check = check

    def wait(self, timeout=None):
        cur = current_stream(self._device)[0]
        if cur is not self._stream:
            if self._event is not None:
                cur.wait_event(self._event)
            else:
                cur.wait_stream(self._stream)
        self._check()
        return True

    def is_completed(self):
        done = bool((self._event if self._event is not None else self._stream).query())
        if done:
            self._check()
        return done

    def is_success(self):
        try:
            return self.is_completed()
        except Exception:  # noqa: BLE001 - is_success reports, it does not raise
            return False

    def get_future(self):
        # As NCCL's: complete once the call is enqueued; what the kernels find later is the
        # communicator's error, raised by wait(), is_completed() and every later call.
        source, fut = _future(self)
        source.set_result(None)
        return fut


def record_event(stream):
    """A CUDA event recorded on `stream` now."""
    ev = torch.cuda.Event()
    ev.record(stream)
    return ev
