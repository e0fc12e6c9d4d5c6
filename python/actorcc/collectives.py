"""Point-to-point and the collectives built on it, as methods of actorcc.Communicator:
send, recv, batch_send_recv (several of both issued as one), all_to_all, all_to_all_v,
reduce, gather, scatter. Same conventions as the other calls: any DLPack tensor (numpy and
torch alike), stream= and async_op= with the same meaning (see actorcc.communicator).

Semantics (the library's, include/actorcc/communicator.hpp): a send matches the peer's recv
of the same size and dtype, messages between two ranks arrive in order, and a send returns
once the peer has received it, so two ranks that both send before receiving must issue the
pair as one batch_send_recv. Sizes or dtypes that disagree fail on both ranks with an error
naming both; a peer that never posts its part makes the waiting rank time out naming it.
"""
from __future__ import annotations

from . import _tensors as T
from ._refusal import refused_through_group
from .work import Work, record_event

__all__ = ["P2POp", "CollectiveCalls"]

_SEND_NAMES = ("send", "isend")
_RECV_NAMES = ("recv", "irecv")


class P2POp:
    """One transfer of a batch: P2POp("send", tensor, peer) or P2POp("recv", tensor, peer).
    `op` may also be torch.distributed.isend / irecv (as in torch's P2POp)."""

    __slots__ = ("op", "tensor", "peer")

    def __init__(self, op, tensor, peer, _rank=-1):
        name = getattr(op, "__name__", op)
        name = str(name).lower()
        if name not in _SEND_NAMES + _RECV_NAMES:
            raise T.invalid(f"P2POp: op must be 'send' or 'recv' (or torch.distributed.isend/irecv), got {op!r}",
                            _rank)
        self.op = "send" if name in _SEND_NAMES else "recv"
        self.tensor = tensor
        self.peer = int(peer)

    def __repr__(self):
        return f"P2POp({self.op!r}, <{type(self.tensor).__name__}>, peer={self.peer})"


def _as_op(x, rank):
    if isinstance(x, P2POp):
        return x
    if isinstance(x, (tuple, list)) and len(x) == 3:
        return P2POp(*x, _rank=rank)
    # torch.distributed.P2POp and look-alikes: .op, .tensor, .peer (torch's is the group rank)
    if all(hasattr(x, a) for a in ("op", "tensor", "peer")):
        return P2POp(x.op, x.tensor, x.peer, _rank=rank)
    raise T.invalid(f"batch_send_recv: each op must be a P2POp or (op, tensor, peer), got {type(x).__name__}", rank)


class CollectiveCalls:
    """Mixed into actorcc.Communicator (which provides _call, _arg, _executor, _cpu, _rank, _world)."""

    # ---- plumbing -------------------------------------------------------------------------
    def _stream_for(self, ref, stream):
        if stream is not None:
            return T.stream_handle(stream, self._rank)  # checked on the CPU backend too, where it is unused
        if self._cpu or ref is None:
            return 0
        return T.current_stream(ref)

    def _issue(self, make, ref, stream, async_op, result):
        """make(stream, run) validates the call, then runs it (run=True) or returns a _Call.
        Same ordering and async rules as Communicator._run."""
        s = self._stream_for(ref, stream)
        ex = self._executor
        if not async_op:
            if ex is None:
                make(s, True)
            else:  # keep issue order with the pending async calls
                ex.submit(make(s, False).run).result()
            return result
        if self._cpu:
            call = make(s, False)  # validated here, before anything is queued
            return Work(result, future=(ex or self._get_executor()).submit(call.run))
        make(s, True)
        return Work(result, event=record_event(ref, s) if ref is not None else None, check=self._c.check)

    def _pair(self, send, recv):
        """The extension's arguments for an optional input and output, with a common dtype override."""
        a, oa = self._arg(send, "input tensor", False) if send is not None else (None, -1)
        b, ob = self._arg(recv, "output tensor", True) if recv is not None else (None, -1)
        if send is not None and recv is not None and oa != ob:
            raise T.invalid("dtype mismatch between input and output tensors", self._rank)
        return a, b, max(oa, ob)

    def _rank_arg(self, v, what):
        v = int(v)
        if not 0 <= v < self._world:
            raise T.invalid(f"{what} {v} is outside the group of {self._world}", self._rank)
        return v

    # ---- point-to-point -------------------------------------------------------------------
    @refused_through_group
    def send(self, tensor, peer, stream=None, async_op=False):
        """Sends `tensor` to rank `peer` (which calls recv with the same size and dtype).
        Returns when the peer has it (or a Work with async_op=True)."""
        peer = self._rank_arg(peer, "send: peer")
        a, o = self._arg(tensor, "tensor", False)
        return self._issue(lambda s, run: self._call(T.SEND, a, None, 0, peer, s, o, run), tensor, stream, async_op,
                           None)

    @refused_through_group
    def recv(self, tensor, peer, stream=None, async_op=False):
        """Receives into `tensor` what rank `peer` sends. Returns `tensor` (or a Work)."""
        peer = self._rank_arg(peer, "recv: peer")
        a, o = self._arg(tensor, "tensor", True)
        return self._issue(lambda s, run: self._call(T.RECV, None, a, 0, peer, s, o, run), tensor, stream, async_op,
                           tensor)

    @refused_through_group
    def batch_send_recv(self, ops, stream=None, async_op=False):
        """Issues several sends and receives as one (like ncclGroupStart/End, or torch's
        batch_isend_irecv): all progress at once, so any pattern completes (rings, pairwise
        exchanges); ops to the same peer in the same direction keep their order. ops: P2POp
        or (op, tensor, peer) items; a send to this rank itself pairs with a recv from it."""
        items, ref = [], None
        for i, x in enumerate(ops):
            p = _as_op(x, self._rank)
            peer = self._rank_arg(p.peer, f"batch_send_recv: op {i}: peer")
            arg, o = self._arg(p.tensor, f"op {i} tensor", p.op == "recv")
            items.append((p.op == "send", arg, peer, o))
            ref = p.tensor if ref is None else ref
        return self._issue(lambda s, run: self._c.call_batch(items, s, run), ref, stream, async_op, None)

    # ---- collectives ----------------------------------------------------------------------
    @refused_through_group
    def all_to_all(self, input, output=None, stream=None, async_op=False):
        """Splits `input` into world_size equal blocks; block k goes to rank k, whose output
        block r is rank r's. `output`: same size as input (a new tensor without it)."""
        if output is None:
            output = T.empty(input, T.shape_of(input) or (0,))
        a, b, o = self._pair(input, output)
        return self._issue(lambda s, run: self._call(T.ALL_TO_ALL, a, b, 0, 0, s, o, run), input, stream, async_op,
                           output)

    @refused_through_group
    def all_to_all_v(self, input, output, in_counts, out_counts, stream=None, async_op=False):
        """Per-peer sizes: in_counts[k] elements of `input` (at offset sum(in_counts[:k]))
        go to rank k; out_counts[k] elements from rank k land in `output` at
        sum(out_counts[:k]). out_counts[k] here must equal rank k's in_counts[this rank]."""
        a, b, o = self._pair(input, output)
        ic, oc = [int(c) for c in in_counts], [int(c) for c in out_counts]
        return self._issue(lambda s, run: self._call(T.ALL_TO_ALL_V, a, b, 0, 0, s, o, run, ic, oc), input, stream,
                           async_op, output)

    @refused_through_group
    def reduce(self, tensor, root=0, op="sum", stream=None, async_op=False):
        """Reduces `tensor` over all ranks into root's `tensor` (in place); the other ranks'
        tensors are left unchanged. Returns `tensor` (or a Work)."""
        root = self._rank_arg(root, "reduce: root")
        opc = T.OP_CODES.get(op) if type(op) is str else None
        if opc is None:
            opc = T.parse_op(op, self._rank)
        a, o = self._arg(tensor, "tensor", root == self._rank)
        return self._issue(lambda s, run: self._call(T.REDUCE, a, None, opc, root, s, o, run), tensor, stream,
                           async_op, tensor)

    @refused_through_group
    def gather(self, tensor, out=None, root=0, stream=None, async_op=False):
        """Root's `out` (world_size * n elements) receives every rank's `tensor` in rank
        order; elsewhere `out` is not used (pass None). On the root a new tensor is returned
        without `out`; the other ranks return None."""
        root = self._rank_arg(root, "gather: root")
        if self._rank == root and out is None:
            shape = T.shape_of(tensor)
            if shape is None:
                raise T.invalid("gather: cannot tell the input's shape: pass out=", self._rank)
            out = T.empty(tensor, (self._world * shape[0],) + shape[1:] if shape else (self._world,))
        if self._rank != root:
            out = None
        a, b, o = self._pair(tensor, out)
        return self._issue(lambda s, run: self._call(T.GATHER, a, b, 0, root, s, o, run), tensor, stream, async_op,
                           out)

    @refused_through_group
    def scatter(self, input, out, root=0, stream=None, async_op=False):
        """Rank r's `out` (n elements) receives block r of root's `input` (world_size * n
        elements); elsewhere `input` is not used (pass None). Returns `out` (or a Work)."""
        root = self._rank_arg(root, "scatter: root")
        if out is None:
            raise T.invalid("scatter: every rank needs an output tensor (out)", self._rank)
        a, b, o = self._pair(input if self._rank == root else None, out)
        return self._issue(lambda s, run: self._call(T.SCATTER, a, b, 0, root, s, o, run), out, stream, async_op, out)
