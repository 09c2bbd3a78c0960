"""Training runs as a worker performs them for the equivalence checks.

Written once against a ``workers.protocol.Session`` (both runners' sessions
meet it), so every path runs the very same loop.  Framework-free and NumPy
1.23-safe: the MXNet worker imports it too.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Mapping

import numpy as np

from workers.messages import ConvergeAnswer
from workers.protocol import Predictor, Session, Trainer


def trajectory(
    session: Session, xs: np.ndarray, ys: np.ndarray, skip: Collection[str] = ()
) -> dict[str, np.ndarray]:
    """One optimizer step per mini-batch of ``xs``/``ys``.

    Returns ``loss`` (one loss per step, at the parameters before it) and, for
    every step ``t`` (from 1) and parameter but those in ``skip``
    (``ModelSpec.noise_trained``), ``step<t>/<name>``: the canonical
    parameter after that step.
    """
    arrays: dict[str, np.ndarray] = {}
    losses = []
    for t, (x, y) in enumerate(zip(xs, ys, strict=True), start=1):
        losses.append(session.step(x, y))
        for name, a in session.params().items():
            if name not in skip:
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


def converge(
    train: Trainer,
    batches: int,
    predictor: Callable[[Mapping[str, np.ndarray]], Predictor],
    test_y: np.ndarray,
    epochs: int,
    *,
    stop_at: float | None = None,
) -> ConvergeAnswer:
    """``epochs`` epochs of ``train``, each one call over its ``batches``
    resident mini-batches, timed as the harness times it (the closure returns
    when its work is finished); after each, untimed, the parameters it left
    go through ``predictor`` over the test batches, and the first
    ``len(test_y)`` outputs give the test accuracy and loss.  Stops early at
    ``stop_at`` accuracy, or when training left a NaN or inf behind."""
    seconds: list[float] = []
    accuracies: list[float] = []
    test_losses: list[float | None] = []
    train_losses: list[float | None] = []
    nonfinite = None
    for _ in range(epochs):
        start = time.perf_counter()
        train(batches)
        seconds.append(time.perf_counter() - start)
        check = train.finish()
        train_losses.append(check.final_loss)
        if check.nonfinite is not None:
            nonfinite = check.nonfinite
            break
        run = predictor(check.params)
        run()
        logits = np.concatenate(run.outputs())
        accuracy, loss = scores(logits[: len(test_y)], test_y)
        accuracies.append(accuracy)
        test_losses.append(loss)
        if stop_at is not None and accuracy >= stop_at:
            break
    return ConvergeAnswer(
        train_s=seconds,
        accuracy=accuracies,
        test_loss=test_losses,
        train_loss=train_losses,
        nonfinite=nonfinite,
    )


def scores(logits: np.ndarray, labels: np.ndarray) -> tuple[float, float | None]:
    """Accuracy and mean cross-entropy (float64; None when not finite) of
    ``logits`` against ``labels``: over every position of a model with a row
    per step or pixel, as over every example of one row."""
    z = np.asarray(logits, np.float64)
    z = z.reshape(-1, z.shape[-1])
    labels = np.asarray(labels).reshape(-1)
    z = z - z.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    loss = float(-np.mean(log_p[np.arange(len(labels)), labels]))
    accuracy = float(np.mean(np.argmax(z, axis=1) == labels))
    return accuracy, loss if math.isfinite(loss) else None
