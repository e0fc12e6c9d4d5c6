"""The Ray Direct Transport "ACTORCC" under its earlier name: actorcc.ray.direct_transport holds
it (register_tensor_transport, transfer_errors, pair_groups). Importing this module does not
import ray."""
from __future__ import annotations

from .ray.direct_transport import TRANSPORT_NAME, pair_groups, register_tensor_transport, transfer_errors

__all__ = ["register_tensor_transport", "transfer_errors", "pair_groups", "TRANSPORT_NAME"]
