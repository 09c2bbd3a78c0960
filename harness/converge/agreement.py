"""Do the paths' accuracy curves agree, within what float32 chaos allows?

Training is chaotic: two correct float32 paths that round one operation
differently part ways step by step, and after a few epochs their test
accuracies differ by a few samples for no fault of either.  How much is
measured, not guessed: the *ensemble* is ``k`` runs of each of the
profile's ``ensemble_paths`` from the canonical weights with every weight
nudged by ``nudge_ulps`` float32 ulps (64) in a seeded random direction,
beside its run from the weights as they are.  Why 64, not one: a nudge
perturbs once, while two implementations round differently at every step;
on LeNet, one-ulp nudges left each implementation's runs identical for
three epochs while XLA's and oneDNN's rounding parted them by 4 test
samples, and 64-ulp nudges spread each implementation's runs as far as
that (docs/results/converge.md).  At epoch ``e`` the ensemble's accuracies span
``[low_e, high_e]``; a path agrees when its accuracy lies within

    [low_e - m, high_e + m],
    m = max(largest span of any epoch of the run, 1 / test samples)

at every epoch both ran.  The span widens the band on each side because a
few runs underestimate the spread of many (of ``k + 1`` exchangeable runs,
a new one falls outside their span with probability ``2 / (k + 2)``).  It
is the largest span over the whole run, not this epoch's nor the largest
so far: an epoch at which the runs happen to agree must not narrow the
allowance (LeNet's ensemble agreed exactly at epochs 4 and 16 of a run
where the paths were one sample apart there), and correct paths that round
differently at every step part sooner than one path's one-ulp nudges
spread (LeNet on the AVX-512 host: Keras and native JAX, rounding as XLA
does, 2 test samples from the oneDNN paths at epoch 2 and 4 at epoch 3,
while every nudged run of each implementation was still identical there;
the nudged runs spread by up to 6 samples later).  One test sample is the
smallest step an accuracy can take.  docs/results/converge.md shows the
spreads measured.

**No judge is one implementation** (``vote``): the ensemble runs on
several paths (``ensemble_paths``: native PyTorch, JAX and TensorFlow by
default), each nudged ``k`` times.  A fault one of them shares with its
nudged copies (a wrong accuracy count, a drift that only shows after
hundreds of steps) moves its whole ensemble, so a single one would judge
with the fault.  Two implementations agree when, at every epoch, the gap
between their ranges of accuracies is at most
``max(the widest span of either over the whole run, 1 / test samples)``:
the allowance a path gets, symmetric, and over all of each one's runs
rather than one lucky curve.  A fault smaller than that spread cannot be
told from chaos, and is not claimed to be.  As in the float64 gate's vote
(``equivalence.reference.vote``), the judges are the implementation that
agrees with the most others and those agreeing with it; one left outside
is the *odd one out*, named with the first epoch it leaves the others'
band, and every path is judged against the band of the judges' runs
pooled (``Vote.allowed``).  When no two
agree nothing is judged, and that is said.
Framework-free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

ROUNDING = 1e-9  # accuracies are counts over test samples: 0.501 - 0.5 > 0.001


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
    at = [[c[e] for c in curves] for e in range(epochs)]
    widest = max([1.0 / test_samples] + [max(v) - min(v) for v in at])
    low = tuple(min(v) - widest for v in at)
    high = tuple(max(v) + widest for v in at)
    return Band(low, high, len(curves))


def disagreement(curve: Sequence[float], allowed: Band) -> str | None:
    """None when ``curve`` lies within ``allowed`` at every epoch both have,
    else one sentence naming the first epoch where it does not."""
    for e, accuracy in enumerate(curve[: len(allowed.low)]):
        if not allowed.low[e] - ROUNDING <= accuracy <= allowed.high[e] + ROUNDING:
            return (
                f"epoch {e + 1}: accuracy {accuracy:.4f} outside "
                f"[{allowed.low[e]:.4f}, {allowed.high[e]:.4f}], the spread of "
                f"{allowed.runs} nudged runs, widened by its widest over the run"
            )
    return None


def apart(
    a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], test_samples: int
) -> str | None:
    """None when two implementations' runs ``a`` and ``b`` agree (see the
    module's docstring), else one sentence naming the first epoch where the
    gap between their ranges exceeds the allowance."""
    epochs = min(len(c) for c in [*a, *b])
    ranges = [([c[e] for c in a], [c[e] for c in b]) for e in range(epochs)]
    widest = max(
        [1.0 / test_samples] + [max(r) - min(r) for pair in ranges for r in pair]
    )
    for e, (in_a, in_b) in enumerate(ranges):
        gap = max(min(in_a) - max(in_b), min(in_b) - max(in_a), 0.0)
        if gap > widest + ROUNDING:
            return (
                f"from epoch {e + 1} (accuracies {min(in_a):.4f}-{max(in_a):.4f} "
                f"against {min(in_b):.4f}-{max(in_b):.4f}: "
                f"{gap * test_samples:.3g} test samples apart, allowed "
                f"{widest * test_samples:.3g})"
            )
    return None


@dataclass(frozen=True)
class Vote:
    """What the ensemble's implementations decided: the judges (empty when
    no two agree), the odd ones out (those that disagree with the judges),
    those absent (fewer than two runs trained: they cannot vote), their
    runs, and a sentence wherever the judges are fewer than the
    implementations."""

    judges: tuple[str, ...]
    odd: tuple[str, ...]
    absent: tuple[str, ...]
    runs: Mapping[str, Sequence[Sequence[float]]] = field(repr=False)
    test_samples: int
    sentence: str | None = None

    @property
    def allowed(self) -> Band | None:
        """The allowance on every path's curve: the judges' runs pooled (an
        implementation's own path among them: the vote has judged its runs,
        as a whole, against the others'); None when nothing can judge."""
        return band([c for j in self.judges for c in self.runs[j]], self.test_samples)


def vote(runs: Mapping[str, Sequence[Sequence[float]]], test_samples: int) -> Vote:
    """The judges among the ensemble's implementations: ``runs`` holds, per
    implementation in the profile's order, its accuracy curves (the plain
    run and the nudged ones); one with fewer than two cannot vote."""
    able = {i: c for i, c in runs.items() if len(c) >= 2 and test_samples >= 1}
    unable = [i for i in runs if i not in able]
    why = {
        (a, b): apart(able[a], able[b], test_samples)
        for n, a in enumerate(able)
        for b in list(able)[n + 1 :]
    }

    def agrees(a: str, b: str) -> bool:
        return a == b or why.get((a, b), why.get((b, a))) is None

    count = {i: sum(agrees(i, j) for j in able if j != i) for i in able}
    best = max(able, key=lambda i: count[i], default=None)
    cannot = "; ".join(
        f"{i} cannot vote: fewer than two of its runs trained" for i in unable
    )
    if best is None or (count[best] == 0 and len(able) > 1):
        pairs = "; ".join(f"{a} and {b} apart {w}" for (a, b), w in why.items() if w)
        return Vote(
            (),
            tuple(able),
            tuple(unable),
            runs,
            test_samples,
            f"no two of the ensemble's implementations ({', '.join(runs)}) agree "
            f"({'; '.join(s for s in (pairs, cannot) if s) or 'none trained'}), "
            "so no path can be judged",
        )
    judges = tuple(i for i in able if agrees(best, i))
    odd = tuple(i for i in able if i not in judges)
    said = [
        f"ODD ONE OUT: {i}'s training or scoring disagrees with "
        f"{' and '.join(judges)}, which agree, {why.get((best, i), why.get((i, best)))}"
        for i in odd
    ] + ([cannot] if cannot else [])
    if len(judges) == 1:  # odd is empty: two able ones that disagree returned above
        said.append(
            f"{best} alone judges: a fault its nudged runs share with it cannot "
            "be seen (the profile's ensemble_paths want two or more)"
        )
    elif said:
        said.append(f"every path is judged against {' and '.join(judges)}")
    return Vote(judges, odd, tuple(unable), runs, test_samples, "; ".join(said) or None)


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
