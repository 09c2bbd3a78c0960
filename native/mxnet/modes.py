"""MXNet's execution modes: imperative, or a hybridized ``HybridBlock``.

- ``imperative`` (the default, ``native.mxnet.common``): every ``mx.nd``
  operator is pushed to MXNet's asynchronous engine as it is called, and
  ``mx.autograd`` records them.
- ``hybrid`` (``native.mxnet.hybrid``, also the path ``native-mxnet-hybrid``):
  the forward pass is hybridized into one cached symbolic graph (with
  ``static_alloc``), whose backward pass MXNet derives and runs as a graph
  too; the loss and the hand-written optimizer stay imperative (``mx.nd``).

A hybridized block compiles its graph once per ``apply`` it is bound to (see
``hybrid.Model.bind``), on the first call.
"""

from __future__ import annotations

from typing import cast

import native
from native.mxnet import common, hybrid
from native.protocol import Framework

MODES = {
    "imperative": "every mx.nd operator as it is called, autograd recording",
    "hybrid": "hybridized HybridBlock: the forward pass one cached graph",
}
DEFAULT = "imperative"
assert tuple(MODES) == native.MODES["mxnet"]


def framework(mode: str) -> Framework:
    """The MXNet surface in ``mode``: ``common`` itself for the default."""
    if mode not in MODES:
        raise ValueError(f"unknown MXNet mode {mode!r}; known: {', '.join(MODES)}")
    if mode == DEFAULT:
        return cast("Framework", common)
    # hybrid.py's own surface, unchanged but for describe() naming the mode.
    return native.in_mode(cast("Framework", hybrid), mode)
