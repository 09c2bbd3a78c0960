"""A model's several inputs, targets or outputs as one array, and back.

Everything that moves data between the harness and a worker (the batches
file, the messages, the arrays a check compares) holds one array per
quantity.  A model with several inputs (``ModelSpec.more_inputs``) or
several outputs (``ModelSpec.heads``) has them packed into one: each part
flattened after the leading axes (``(count, batch)`` or ``(batch,)``) and
the parts concatenated in the model's order, as float32 (token ids and
class ids are whole numbers below 2**24, which float32 holds exactly; a
float64 run's outputs as float64).  A
runner splits them back (``inputs``, ``targets``) when it makes its
batches resident, before anything is timed, so every path is fed the
model's own tensors; ``outputs`` packs what a path gives for the checks.  A
model with one input and one output is never packed: its arrays are the
ones it always had.

Framework-free and NumPy 1.23-safe: the MXNet worker imports it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from zoo.kinds.base import Shape
from zoo.losses import LOSSES
from zoo.specs import Head, ModelSpec


def pack(parts: Sequence[np.ndarray], lead: int, dtype: Any = np.float32) -> np.ndarray:
    """``parts`` (the same ``lead`` leading axes) as one array of ``dtype``:
    each flattened after them, concatenated along the last axis."""
    front = parts[0].shape[:lead]
    flat = [np.asarray(p, dtype).reshape(*front, -1) for p in parts]
    return np.concatenate(flat, axis=-1)


def _split(packed: np.ndarray, shapes: Sequence[Shape]) -> list[np.ndarray]:
    """``packed``'s last axis cut into ``shapes``, each reshaped."""
    sizes = [math.prod(s) for s in shapes]
    if packed.shape[-1] != sum(sizes):
        raise ValueError(
            f"a packed array of {packed.shape[-1]} values per example cannot "
            f"hold parts of shapes {list(shapes)}"
        )
    cuts = np.cumsum(sizes)[:-1]
    front = packed.shape[:-1]
    return [
        part.reshape(*front, *shape)
        for part, shape in zip(np.split(packed, cuts, axis=-1), shapes, strict=True)
    ]


def target_shape(head: Head) -> Shape:
    """One example's target for ``head``: a class id per position, or a
    row per position as wide as the output."""
    ids = LOSSES[head.objective.loss].targets == "ids"
    return head.positions if ids else head.shape


def split_inputs(spec: ModelSpec, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """A packed ``x`` as the model's inputs, each in its own dtype (int32
    token ids where embeddings take it)."""
    parts = _split(x, spec.input_shapes)
    return tuple(
        part.astype(np.int32) if spec.input_tokens(name) else part
        for name, part in zip(spec.input_names, parts, strict=True)
    )


def split_targets(spec: ModelSpec, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """A packed ``y`` as each output's targets (int32 class ids)."""
    parts = _split(y, [target_shape(h) for h in spec.heads])
    return tuple(
        part.astype(np.int32) if LOSSES[h.objective.loss].targets == "ids" else part
        for h, part in zip(spec.heads, parts, strict=True)
    )


def inputs(spec: ModelSpec, x: np.ndarray, convert: Callable[[np.ndarray], Any]) -> Any:
    """``convert(x)`` for a model with one input; the tuple of each of its
    inputs converted for several."""
    if not spec.more_inputs:
        return convert(x)
    return tuple(convert(part) for part in split_inputs(spec, x))


def targets(
    spec: ModelSpec, y: np.ndarray, convert: Callable[[np.ndarray], Any]
) -> Any:
    """``convert(y)`` for a model with one output; the tuple of each
    output's targets converted for several."""
    if not spec.several_outputs:
        return convert(y)
    return tuple(convert(part) for part in split_targets(spec, y))


def outputs(
    spec: ModelSpec, out: Any, to_numpy: Callable[[Any], np.ndarray]
) -> np.ndarray:
    """A path's output as one NumPy array: ``to_numpy(out)`` for one
    output; for several (``out`` a tuple in the model's order) each read
    back and packed (leading axis: the batch) in their own precision: a
    float64 run's stay float64 (packed as float32, every float64 run's
    outputs were rounded to float32, and two that agree to 1e-15 could
    round a float32 unit apart: finding d8b231ec1c, a float64 run voted
    out for it)."""
    if not spec.several_outputs:
        return to_numpy(out)
    parts = [to_numpy(o) for o in out]
    wide = any(np.asarray(p).dtype == np.float64 for p in parts)
    return pack(parts, 1, np.float64 if wide else np.float32)


def per_output(spec: ModelSpec, packed: np.ndarray) -> dict[str, np.ndarray]:
    """A packed output of a model with several (``outputs``) as each
    output's own array by its layer's name; ``{}`` for a model with one."""
    if not spec.several_outputs:
        return {}
    parts = _split(packed, [h.shape for h in spec.heads])
    return {h.layer: part for h, part in zip(spec.heads, parts, strict=True)}
