"""How far a float32 KL divergence of two nearly equal distributions is from
the float64 one, on one native framework's loss (``common.loss``): its
terms ``t log(t / p)`` of both signs cancel, so its relative error grows as
the divergence vanishes (docs/results/kinds.md, finding 08de0aec85).

``python docs/results/losses/kl_cancellation.py torch`` (or ``mxnet`` from
the MXNet environment): the median, 99th percentile and largest relative
error over 2,000 pairs of 2 classes, the probabilities a softmax of logits
0.03 apart, each against the exact divergence of the same float32 inputs.
"""

from __future__ import annotations

import sys

import numpy as np

from zoo.losses import Objective

PAIRS = 2000


def main(framework: str) -> None:
    rng = np.random.default_rng(1)
    goal = Objective("kl_divergence", False)
    z = rng.standard_normal((PAIRS, 2)) * 0.5
    t = (np.exp(z) / np.exp(z).sum(1, keepdims=True)).astype(np.float32)
    zp = (z + rng.standard_normal(z.shape) * 0.03).astype(np.float32)
    if framework == "mxnet":
        import mxnet as mx

        from native.mxnet import common, ops

        def tensor(a: np.ndarray) -> object:
            return mx.nd.array(a, dtype="float32")

        def value(p: object, y: object) -> float:
            return float(common.loss(p, y, goal).asnumpy().item())
    else:
        import torch

        from native.torch import common, ops  # type: ignore[no-redef]

        def tensor(a: np.ndarray) -> object:
            return torch.tensor(a, dtype=torch.float32)

        def value(p: object, y: object) -> float:
            return float(common.loss(p, y, goal).item())

    probabilities = ops.softmax(tensor(zp), False)
    errors = []
    for i in range(PAIRS):
        got = value(probabilities[i : i + 1], tensor(t[i : i + 1]))
        p = np.exp(zp[i].astype(np.float64))
        p /= p.sum()
        exact = float((t[i] * np.log(t[i] / p)).sum())
        errors.append(abs(got - exact) / abs(exact))
    e = np.array(errors)
    print(
        f"{framework}: median {np.median(e):.2g}, 99th percentile "
        f"{np.quantile(e, 0.99):.2g}, largest {e.max():.3g}"
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "torch")
