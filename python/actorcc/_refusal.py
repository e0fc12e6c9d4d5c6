"""The decorator of the communicator's calls whose bad argument on one rank is refused through
the group, whether the Python layer, the extension or the library found it: in a group of more
than one rank the refusal aborts the group, so the other ranks' pending and later calls raise a
RemoteError naming this rank and the reason at once instead of waiting for their timeout
(docs/reliability.md). Applied at each such call's definition, in actorcc.communicator and
actorcc.collectives; the object it decorates provides _refuse(error) (Communicator._refuse).
"""
from __future__ import annotations

import functools

from . import _tensors as T

__all__ = ["refused_through_group"]


def refused_through_group(call):
    """`call`, raising what it raises; an InvalidArgumentError is told to the other ranks first."""
    @functools.wraps(call)
    def refusing(self, *args, **kwargs):
        try:
            return call(self, *args, **kwargs)
        except T.InvalidArgumentError as e:
            self._refuse(e)
            raise
    return refusing
