"""Synthetic mini-batches with each workload's shapes, drawn with NumPy.

The embedded default needs no download.  Inputs are standard-normal float32
in canonical layout (images ``(N, H, W, C)``, sequences ``(N, T, F)``), or
int32 token ids ``(N, T)`` drawn uniformly from the vocabulary for a model
that starts with an embedding (``ModelSpec.tokens``); the targets are what
the model's loss takes (``zoo.losses.draw_targets``: int32 class ids, or
float32 one-hot, 0/1 or real rows).  Every path is fed the very same arrays in the same
order, so a mini-batch ``i`` is identical everywhere.  A model with several
inputs or outputs has each drawn in turn and packed into one array
(``zoo.packing``), which every runner splits back before it times.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from zoo import packing
from zoo.arrays import save_npz
from zoo.losses import draw_targets
from zoo.specs import ModelSpec, output_positions


def make_batches(
    spec: ModelSpec,
    seed: int,
    batch_size: int,
    count: int,
    input_shape: tuple[int, ...] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` stacked mini-batches, x ``(count, batch, *input)`` and y
    ``(count, batch, *positions)`` (class ids) or ``(count, batch,
    *positions, outputs)``: a target per position of the output
    (``output_positions``: none for one row, the steps of a sequence).

    ``input_shape`` overrides the spec's (used for LSTM sequence lengths).
    """
    if batch_size < 1 or count < 1:
        raise ValueError("batch size and batch count must be at least 1")
    shape = input_shape or spec.input_shape
    rng = np.random.default_rng(seed)
    if spec.one_to_one:
        x = _draw_input(rng, spec.tokens, (count, batch_size, *shape))
        goal = spec.workload.objective
        positions = output_positions(spec, shape)
        y = draw_targets(rng, goal, (count, batch_size, *positions), spec.classes)
        return x, y
    # Several inputs or outputs: each drawn in the model's order, packed
    # into one array (``zoo.packing``).
    lead = (count, batch_size)
    xs = [
        _draw_input(rng, spec.input_tokens(name), (*lead, *given))
        for name, given in zip(spec.input_names, spec.input_shapes, strict=True)
    ]
    ys = [
        draw_targets(rng, h.objective, (*lead, *h.positions), h.shape[-1])
        for h in spec.heads
    ]
    x = packing.pack(xs, 2) if len(xs) > 1 else xs[0]
    y = packing.pack(ys, 2) if len(ys) > 1 else ys[0]
    return x, y


def _draw_input(
    rng: np.random.Generator, tokens: int, shape: tuple[int, ...]
) -> np.ndarray:
    """Int32 token ids below ``tokens``, or standard-normal float32."""
    if tokens:
        return rng.integers(0, tokens, size=shape).astype(np.int32)
    return rng.standard_normal(shape).astype(np.float32)


def batches_file(
    spec: ModelSpec, seed: int, batch_size: int, count: int, cache_dir: Path
) -> Path:
    """Path of the stacked batches for these settings, written on first use."""
    path = cache_dir / f"data-{spec.name}-seed{seed}-b{batch_size}-n{count}.npz"
    if not path.exists():
        x, y = make_batches(spec, seed, batch_size, count)
        save_npz(path, {"x": x, "y": y})
    return path
