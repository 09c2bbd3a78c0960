"""Training runs as a worker performs them for the equivalence checks.

Written once against a ``workers.protocol.Session`` (both runners' sessions
meet it), so every path runs the very same loop.  Framework-free and NumPy
1.23-safe: the MXNet worker imports it too.
"""

from __future__ import annotations

import numpy as np

from workers.protocol import Session


def trajectory(
    session: Session, xs: np.ndarray, ys: np.ndarray
) -> dict[str, np.ndarray]:
    """One optimizer step per mini-batch of ``xs``/``ys``.

    Returns ``loss`` (one loss per step, at the parameters before it) and, for
    every step ``t`` (from 1) and parameter, ``step<t>/<name>``: the canonical
    parameter after that step.
    """
    arrays: dict[str, np.ndarray] = {}
    losses = []
    for t, (x, y) in enumerate(zip(xs, ys, strict=True), start=1):
        losses.append(session.step(x, y))
        for name, a in session.params().items():
            arrays[f"step{t}/{name}"] = a
    arrays["loss"] = np.asarray(losses, np.float64)
    return arrays


def accuracy(
    session: Session,
    train_x: np.ndarray,
    train_y: np.ndarray,
    test_x: np.ndarray,
    test_y: np.ndarray,
) -> list[float]:
    """Train on ``train_x`` (``(epochs, batches, batch, *input)``) and return
    the test accuracy after every epoch."""
    accuracies = []
    for epoch_x, epoch_y in zip(train_x, train_y, strict=True):
        for x, y in zip(epoch_x, epoch_y, strict=True):
            session.step(x, y, with_loss=False)
        predicted = np.argmax(session.logits(test_x), axis=1)
        accuracies.append(float(np.mean(predicted == test_y)))
    return accuracies
