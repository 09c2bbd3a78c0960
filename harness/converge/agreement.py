"""Do the paths' accuracy curves agree, within what float32 chaos allows?

Training is chaotic: two correct float32 paths that round one operation
differently part ways step by step, and after a few epochs their test
accuracies differ by a few samples for no fault of either.  How much is
measured, not guessed: the *ensemble* is ``k`` runs of one path (the
profile's ``ensemble_path``) from the canonical weights with every weight
nudged by one float32 ulp in a seeded random direction, beside its run from
the weights as they are.  At epoch ``e`` the ensemble's accuracies span
``[low_e, high_e]``; a path agrees when its accuracy lies within

    [low_e - m_e, high_e + m_e],
    m_e = max(largest span of epochs 1..e, 1 / test samples)

at every epoch both ran.  The span widens the band on each side because a
few runs underestimate the spread of many (of ``k + 1`` exchangeable runs,
a new one falls outside their span with probability ``2 / (k + 2)``).  It
is the largest span *so far*, not this epoch's, because chaos does not
contract: an epoch at which the runs happen to agree must not narrow the
allowance (LeNet's ensemble agreed exactly at epochs 4 and 16 of a run
where the paths were one sample apart there).  One test sample is the
smallest step an accuracy can take.  docs/results/converge.md shows the
spreads measured.
Framework-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Band:
    """Per epoch, what a path's accuracy may be: ``low[e]`` to ``high[e]``."""

    low: tuple[float, ...]
    high: tuple[float, ...]
    runs: int  # the ensemble's runs it comes from

    def width(self, epoch: int) -> float:
        return self.high[epoch] - self.low[epoch]


def band(curves: Sequence[Sequence[float]], test_samples: int) -> Band | None:
    """The allowance the ensemble's ``curves`` set, over the epochs every one
    of them reached; None with fewer than two curves (no spread to measure)."""
    if len(curves) < 2 or test_samples < 1:
        return None
    epochs = min(len(c) for c in curves)
    low, high = [], []
    widest = 1.0 / test_samples
    for e in range(epochs):
        values = [c[e] for c in curves]
        lo, hi = min(values), max(values)
        widest = max(widest, hi - lo)
        low.append(lo - widest)
        high.append(hi + widest)
    return Band(tuple(low), tuple(high), len(curves))


def disagreement(curve: Sequence[float], allowed: Band) -> str | None:
    """None when ``curve`` lies within ``allowed`` at every epoch both have,
    else one sentence naming the first epoch where it does not."""
    for e, accuracy in enumerate(curve[: len(allowed.low)]):
        if not allowed.low[e] <= accuracy <= allowed.high[e]:
            return (
                f"epoch {e + 1}: accuracy {accuracy:.4f} outside "
                f"[{allowed.low[e]:.4f}, {allowed.high[e]:.4f}], the spread of "
                f"{allowed.runs} runs nudged by one ulp, widened by its widest so far"
            )
    return None


def reached(
    accuracy: Sequence[float], seconds: Sequence[float], target: float | None
) -> tuple[int, float] | None:
    """``(epochs, training seconds)`` to the first epoch whose test accuracy
    reaches ``target``; None when none does (or there is no target)."""
    if target is None:
        return None
    elapsed = 0.0
    for e, (a, s) in enumerate(zip(accuracy, seconds, strict=False), start=1):
        elapsed += s
        if a >= target:
            return e, elapsed
    return None
