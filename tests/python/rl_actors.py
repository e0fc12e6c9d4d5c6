"""Actor classes for the Ray Direct Transport tests (test_rl_ray_transport.py): a trainer whose
method returns tensors over the "ACTORCC" transport, and rollout actors that receive them. The
die_* methods make the next transfer stop half way (the first tensor moved, the rest not) and
SIGKILL the process, so the peer is inside its transfer when the death comes."""
import hashlib
import os
import signal
import time

import ray
import torch

import actorcc.ray_transport as rt


def digest(t):
    """sha256 of the tensor's bytes (any dtype, bfloat16 included)."""
    return hashlib.sha256(t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()).hexdigest()


def describe(tensors):
    return {k: (tuple(v.shape), str(v.dtype), digest(v)) for k, v in tensors.items()}


def make(spec, seed):
    """{name: (shape, dtype name)} -> tensors with seeded random contents."""
    g = torch.Generator().manual_seed(seed)
    return {k: torch.randn(shape, generator=g).to(getattr(torch, dtype)) for k, (shape, dtype) in spec.items()}


def _die_half_way(stamp):
    """The next transfer of this process moves its first tensor only, then the process dies."""
    from actorcc.ray import transport_manager as m

    real = m._transfer

    def half(comm, ops):
        real(comm, ops[:1])
        with open(stamp, "w") as f:
            f.write(repr(time.time()))
        os.kill(os.getpid(), signal.SIGKILL)

    m._transfer = half


def _stall(seconds):
    """The next transfer of this process does nothing for `seconds` (a live but stuck peer)."""
    from actorcc.ray import transport_manager as m

    m._transfer = lambda comm, ops: time.sleep(seconds)


class Common:
    def pid(self):
        return os.getpid()

    def errors(self):
        return rt.transfer_errors()

    def groups(self):
        return rt.pair_groups()

    def die_during_next_transfer(self, stamp):
        _die_half_way(stamp)

    def stall_next_transfer(self, seconds):
        _stall(seconds)


def actor_classes():
    """(Trainer, Rollout), made here as a driver script's classes are: Ray ships them by value,
    so the workers need not know "ACTORCC" before Ray registers it in them. (A class defined in a
    module the workers import runs @ray.method again there, which checks the name: such a module
    calls actorcc.ray.register_tensor_transport() at its top too.)"""

    class Trainer(Common):
        def __init__(self, seed=0):
            self.seed = seed

        @ray.method(tensor_transport="ACTORCC")
        def weights(self, spec):
            self.last = make(spec, self.seed)
            return self.last

        def described(self):
            return describe(self.last)

    class Rollout(Common):
        def load(self, weights):
            self.weights = weights
            return describe(weights)

        def timed_load(self, weights):
            return time.time(), describe(weights)

    return Trainer, Rollout
