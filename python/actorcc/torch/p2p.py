"""Sends and receives of the "actorcc" torch process group: torch's coalesced batches
(batch_isend_irecv) and the deferred isend/irecv outside them, each run as one actorcc
batch_send_recv. Mixed into ActorccProcessGroup (process_group.py), whose _issue, _w,
_check_one, _refuse and _cpu_backend these use."""
from __future__ import annotations

from .._actorcc import InvalidArgumentError, UnsupportedError
from ._args import _first_tensor, _flat
from .work import DoneWork, HostWork


class _DeferredP2P(HostWork):
    """A send or recv not yet issued (see P2PCalls._flush_p2p): wait() issues it
    with every other deferred one and then waits for that batch; its future completes with
    the batch's outcome."""

    def __init__(self, pg, result):
        super().__init__(result, pg._rank_)
        self._pg, self._batch = pg, None

    def _issued(self, batch):
        """`batch`: the Work of the batch this op was issued in."""
        self._batch = batch

        def relay(f):
            try:
                f.wait()
            except Exception as e:  # noqa: BLE001 - the batch's error is this op's
                self._complete(e)
                return
            self._complete()
        batch.get_future().add_done_callback(relay)

    def wait(self, timeout=None):
        if self._batch is None:
            self._pg._flush_p2p()
        return self._batch.wait(timeout)

    def is_completed(self):
        return self._batch is not None and self._batch.is_completed()

    def is_success(self):
        return self._batch is not None and self._batch.is_success()


class P2PCalls:
    """The group's send, recv and their batches (mixed into ActorccProcessGroup)."""

    # batch_isend_irecv: torch coalesces the ops of a batch for backends that say they can
    # (asking _get_backend(device)); between _start_coalescing and _end_coalescing send and
    # recv only collect, and the batch runs as one actorcc batch_send_recv, so any pattern of
    # them completes. Outside such a batch (torch before 2.6 issues a CPU batch op by op, as
    # isend/irecv) a send or recv is deferred: its Work's wait() or the next collective issues
    # every deferred one as one batch, so isend/irecv rings complete, and a blocking send/recv
    # (torch waits on it at once) runs alone.
    supports_coalescing = True

    def _get_backend(self, device):
        return self  # this one object serves every device of the group

    def _start_coalescing(self, device):
        self._batch = []

    def _end_coalescing(self, device):
        self._flush_p2p()
        batch, self._batch = self._batch, None
        if not batch:
            return DoneWork([])
        tensors = [t for _, t, _ in batch]
        other = self._cpu_backend() if not batch[0][1].is_cuda else None
        if other is not None:  # the CPU backend's sends and receives are asynchronous: all at once
            works = [(other.send if k == "send" else other.recv)([t], peer, 0) for k, t, peer in batch]
            for w in works:
                w.wait()
            return DoneWork(tensors)
        return self._issue(batch[0][1], lambda comm: comm.batch_send_recv(batch), tensors)

    def _p2p(self, kind, tensors, peer, tag):
        t = self._check_one(tensors, kind)
        if tag:
            self._refuse(t, InvalidArgumentError(f"actorcc torch backend: send/recv tags are not supported (got tag {tag})"))
        w = self._w(t)
        if self._batch is not None:
            self._batch.append((kind, _flat(w), peer))
            return DoneWork(tensors)  # torch waits on the batch's Work (_end_coalescing)
        if not t.is_cuda and self._cpu_backend() is not None:
            return getattr(self._cpu_backend(), kind)(tensors, peer, tag)
        work = _DeferredP2P(self, tensors)
        self._deferred.append((kind, _flat(w), peer, work))
        return work

    def _flush_p2p(self):
        """Issues the deferred sends and receives, in order, as one batch per device type."""
        pending, self._deferred = self._deferred, []
        while pending:
            cuda = pending[0][1].is_cuda
            run = [p for p in pending if p[1].is_cuda == cuda]
            pending = [p for p in pending if p[1].is_cuda != cuda]
            ops = [(k, t, peer) for k, t, peer, _ in run]
            batch = self._issue(run[0][1], lambda comm, ops=ops: comm.batch_send_recv(ops), [t for _, t, _ in ops])
            for *_, work in run:
                work._issued(batch)

    def send(self, tensors, dst, tag=0):
        return self._p2p("send", tensors, dst, tag)

    def recv(self, tensors, src, tag=0):
        return self._p2p("recv", tensors, src, tag)

    def recv_anysource(self, tensors, tag=0):
        self._refuse(_first_tensor(tensors), UnsupportedError(
            "actorcc torch backend: recv from any source is not supported; name the source rank"))
