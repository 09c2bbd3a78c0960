"""Which `same` average pools Keras on PyTorch gets wrong: the measurement
behind padded-average-pool.md.

Run as ``python docs/findings/padded_average_pool.py`` (the main
environment: Keras and its three backends).  For each case of ``CASES`` (an
input shape, a pool and its strides, ``padding="same"``), Keras'
``AveragePooling1D``/``2D`` pools one fixed input on each backend (one fresh
process per backend), and the result is compared with float64 NumPy's: the
padding of each axis split as TensorFlow splits it (the smaller half first)
and each window averaged over the positions inside the input, Keras'
documented behaviour.  One JSON line per case: the padding per axis (before,
after), each backend's largest error relative to the largest expected
value, and the backends wrong (past ``WRONG``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

BACKENDS = ("jax", "tensorflow", "torch")
# name: (spatial shape, pool, strides); strides None is Keras' default, the pool.
CASES: dict[str, tuple[tuple[int, ...], int, int | None]] = {
    "1-D, 10 steps, pool 3": ((10,), 3, None),
    "1-D, 10 steps, pool 3, stride 2": ((10,), 3, 2),
    "1-D, 5 steps, pool 3": ((5,), 3, None),
    "1-D, 10 steps, pool 2, stride 1": ((10,), 2, 1),
    "2-D, 6x6, pool 3": ((6, 6), 3, None),
    "2-D, 4x5, pool 3": ((4, 5), 3, None),
    "2-D, 5x5, pool 3": ((5, 5), 3, None),
}
WRONG = 1e-4

CHILD = r"""
import json, os, sys
os.environ["KERAS_BACKEND"] = sys.argv[1]
import keras, numpy as np
pooled = []
for values, pool, strides in json.loads(sys.stdin.read()):
    x = np.asarray(values, dtype="float32")
    kind = {3: keras.layers.AveragePooling1D, 4: keras.layers.AveragePooling2D}
    layer = kind[x.ndim](pool, strides=strides, padding="same")
    pooled.append(keras.ops.convert_to_numpy(layer(x)).astype(float).tolist())
print(json.dumps(pooled))
"""


def the_input(shape: tuple[int, ...]) -> np.ndarray:
    """One example, one channel, distinct values (a repeated edge shows)."""
    values = np.random.default_rng(0).uniform(1.0, 2.0, size=(1, *shape, 1))
    return values.astype(np.float32)


def padding(length: int, pool: int, stride: int) -> tuple[int, int]:
    """`same` padding of one axis, as TensorFlow splits it."""
    out = -(-length // stride)
    total = max((out - 1) * stride + pool - length, 0)
    return total // 2, total - total // 2


def expected(x: np.ndarray, pool: int, stride: int) -> np.ndarray:
    """Each window's average over the positions inside the input (float64)."""
    spatial = x.shape[1:-1]
    pads = [padding(n, pool, stride) for n in spatial]
    outs = [-(-n // stride) for n in spatial]
    result = np.zeros((1, *outs, 1))
    for index in np.ndindex(*outs):
        window = tuple(
            slice(max(i * stride - before, 0), min(i * stride - before + pool, n))
            for i, (before, _), n in zip(index, pads, spatial, strict=True)
        )
        result[(0, *index, 0)] = x[(0, *window, 0)].astype(np.float64).mean()
    return result


def keras_pools(backend: str) -> dict[str, np.ndarray]:
    """Keras' pool of every case's input on one backend, in its own process."""
    cases = [
        (the_input(s).tolist(), pool, strides) for s, pool, strides in CASES.values()
    ]
    done = subprocess.run(
        [sys.executable, "-c", CHILD, backend],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    pooled = json.loads(done.stdout.strip().splitlines()[-1])
    return {name: np.asarray(p) for name, p in zip(CASES, pooled, strict=True)}


def survey() -> list[dict[str, object]]:
    """Every case: its padding per axis and each backend's relative error."""
    by_backend = {backend: keras_pools(backend) for backend in BACKENDS}
    rows: list[dict[str, object]] = []
    for name, (shape, pool, strides) in CASES.items():
        stride = pool if strides is None else strides
        want = expected(the_input(shape), pool, stride)
        errors = {
            backend: float(np.abs(pooled[name] - want).max() / np.abs(want).max())
            for backend, pooled in by_backend.items()
        }
        rows.append(
            {
                "case": name,
                "padding": [padding(n, pool, stride) for n in shape],
                "errors": errors,
                "wrong": sorted(b for b, e in errors.items() if e > WRONG),
            }
        )
    return rows


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    for row in survey():
        print(json.dumps(row))


if __name__ == "__main__":
    main()
