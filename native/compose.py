"""One way to compose a model: walk its spec, one framework's blocks at a time.

Every model, the four reference models and any model a user brings
(``zoo.user_models``), is a sequence of layers (``zoo.specs``), and every
framework's ``ops.py`` offers one block per layer kind with one signature,
``block(h, params, spec, name)``, and one function per activation,
``activation(h)`` (``native.protocol.Ops``).  ``apply`` walks the layers in
order: the block, then the layer's activation, then ``tap(name, h)`` (every
layer but ``flatten``: ``ModelSpec.tapped_layers``).  A layer takes the
previous layer's output, or the outputs of the earlier layers its ``inputs``
names (a residual ``add`` is handed the tuple of them), so a Transformer's
blocks are walked and tapped layer by layer like any other model.  The walk
is plain Python over a spec that does not change, so under ``jax.jit``,
``tf.function``, ``torch.compile`` or a hybridized MXNet block it traces to
the same program a hand-unrolled forward pass gives.

Framework-free: the framework comes in with ``ops``.
"""

from __future__ import annotations

from typing import Any

from native.protocol import Tap, Tensor, no_tap
from zoo.specs import ModelSpec


def apply(
    ops: Any, params: Any, x: Tensor, spec: ModelSpec, tap: Tap = no_tap
) -> Tensor:
    """The model's outputs (logits) for input batch ``x`` in ``ops``'
    framework and layout."""
    h = x
    outputs: dict[str, Tensor] = {}
    for layer in spec.layers:
        if layer.kind == "add":
            h = tuple(outputs[name] for name in layer.inputs)
        elif layer.inputs:
            h = outputs[layer.inputs[0]]
        h = getattr(ops, layer.kind)(h, params, spec, layer.name)
        if layer.activation is not None:
            h = getattr(ops, layer.activation)(h)
        if layer.kind != "flatten":  # see ModelSpec.tapped_layers
            h = tap(layer.name, h)
        outputs[layer.name] = h
    return h
