"""Judging a path against float64, with a reference that a fault in one
implementation cannot blind.

Two float32 paths that differ are not told apart by comparing them with each
other: which one is off?  So every path is measured against a float64 run of
the same model, weights and data, and that error is set against the error
correct float32 computations make on the same case.

**Three float64 implementations vote** (``IMPLEMENTATIONS``: the native
PyTorch, JAX and TensorFlow models with every parameter and input in float64,
``HARNESS_NATIVE_DTYPE``; three frameworks, three sets of kernels).  Two
float64 runs agree when every quantity is within ``CROSS_CHECK_SHARE`` of what
a path is allowed on it.  The reference is the first implementation that
another one agrees with (``vote``); one that the other two contradict (or
whose run failed) is the *odd one out*: the report names it and what was
wrong with it (``Vote.fault``: a float64 run that computed in float32 is a
dtype fault, told apart from wrong model code by what it measurably is), the
checker localizes it against the reference, and every path is still judged.
A vote with an odd one out is not ``Vote.sound``: the tool's own judges were
found wrong, which fails the check even when every path passes.  Only when
no two agree is nothing judged.

**The allowance** on each quantity comes from the float32 runs of the same
implementations (the *baselines*, never given a deliberate fault):

    error(path, float64) <= MULTIPLE * (max over baselines of
                                        error(baseline, float64) + FLOOR)

with the normwise relative error of ``equivalence.compare``.  The largest of
several float32 computations, not one, because one can be lucky: a ReLU whose
float64 pre-activation lies within float32's rounding of zero opens in some
float32 computations and closes in others, and that single gate moves a
nearly cancelling gradient sum (VGG16's first bias gradient, a sum over
16,384 positions) by 3e-4, where a float32 computation that happens to keep
the gate as float64 does is 1.7e-6 off.  On an AVX2 host PyTorch's oneDNN
kernels were that lucky and every other path failed; JAX's and TensorFlow's
float32 runs were not (docs/equivalence.md).  A path is never allowed what
its own implementation's baseline got (``own_implementation``): a fault that
shows only in float32 in that code is in its baseline too.  Baselines of an
odd one out are dropped (its float32 run shares its fault), so with one out
some paths' allowances rest on a single float32 baseline (``thinned``).

**Witnesses** stand in for the lost baseline: a path whose allowance the
vote thinned is judged again with the float32 runs of the other paths that
passed, of other frameworks than its own and not running the odd one's
code (``equivalence.check``), each counted up to what the baselines alone
allow (``witnessed``), so they can raise an allowance at most
``MULTIPLE``-fold.  Why paths and not another run of a remaining
implementation: the float32 error a correct computation makes depends on
its kernels' summation, and after a vote the remaining implementations may
all sum the accurate way.  On gap-cnn (seed 0, batch 4) with native
TensorFlow voted out, native PyTorch's conv-bias gradient was 5.1e-6 off,
as Keras on TensorFlow's and native MXNet's were; JAX's was 7e-8, and at
most 2.2e-7 in four runs on one-ulp-perturbed weights and inputs, so
native PyTorch failed at m = 30 until Keras on TensorFlow or native MXNet
witnessed (issue 65, docs/equivalence.md).

The multiple adapts the allowance to the case: a gradient that nearly cancels
has a large float32 error for every correct computation, a well-conditioned
one a small error.  ``FLOOR``, about float32's machine epsilon, keeps a
quantity every baseline gets (nearly) exactly right from failing a path that
rounded once differently.  A path's "m" (``needed_multiple``) is its largest
``error / (baseline error + FLOOR)``; it passes when that is at most
``MULTIPLE``.  Framework-free.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from equivalence.compare import (
    Entry,
    PairResult,
    distance,
    error_scale,
    quantity_error,
    step_tolerance,
    trajectory_tolerance,
)

Arrays = Mapping[str, np.ndarray]

REFERENCE = "float64"  # how reports name the judge
# The float64 implementations, in order of preference as the reference.
IMPLEMENTATIONS = ("native-torch", "native-jax", "native-tensorflow")
# An implementation runs again in float64 with every layer's output and
# every parameter's gradient perturbed at float32's rounding scale
# (``native.compose``): a bound on what rounding moves each quantity that no
# float32 kernel's luck decides (``perturbation_error``).  Its run's name:
# ``native-torch.perturbed``.  Unlike a float32 baseline it may set its own
# implementation's paths' allowances: a fault in that code shows in its
# float64 runs, which the vote then drops, and a fault that shows in float32
# alone is not in it.
PERTURBED = "perturbed"
# Two float64 runs must agree within this share of what a path is allowed:
# the reference's own doubt stays negligible against the judgement.
CROSS_CHECK_SHARE = 0.01

# Measured over 42 cases (docs/equivalence.md, "Why MULTIPLE = 10"): a
# correct path needed at most 3.41; MXNet's old log_softmax (3.5e-6 off)
# needs 19.1 on the LSTM at seed 15, batch 4, and a bfloat16 computation
# thousands.
MULTIPLE = 10.0
# The least error a float32 result is credited with (float32's machine epsilon
# is 1.2e-7), so that a baseline that is exact by luck allows some rounding.
FLOOR = 1e-7


def allowed(baseline_error: float) -> float:
    """The largest error against float64 a path may have on a quantity whose
    float32 baselines have at most ``baseline_error``."""
    return MULTIPLE * (baseline_error + FLOOR)


def own_implementation(path: str) -> str | None:
    """The implementation in ``IMPLEMENTATIONS`` whose model code ``path``
    runs (``native-torch`` for ``native-torch@compile``), else ``None``."""
    base = path.split("@", maxsplit=1)[0]
    return base if base in IMPLEMENTATIONS else None


def baselines_for(path: str, baselines: Mapping[str, Arrays]) -> list[Arrays]:
    """The baselines that may set ``path``'s allowance: all but its own
    implementation's."""
    own = own_implementation(path)
    return [arrays for name, arrays in baselines.items() if name != own]


def baseline_error(
    baselines: list[Arrays],
    reference: Arrays,
    quantity: str,
    *,
    witnesses: Sequence[Arrays] = (),
    perturbed: Sequence[Arrays] = (),
    judged: Arrays | None = None,
) -> float:
    """The largest error of ``baselines`` against ``reference`` on
    ``quantity`` (``inf`` when one lacks it, or there is none), raised by
    ``witnesses`` as far as ``witnessed`` lets them, and by the ``perturbed``
    runs (``perturbation_error``).  With ``judged`` (the arrays of the path
    being judged) every error is measured on the scale the path's is
    (``on_scale``): the allowance is a distance from the reference, so a
    quantity that vanishes in exact arithmetic is not judged by its noise
    against itself (every run, ~100% off, allowed anything)."""
    if judged is None:
        scale = math.nan
        errors = [quantity_error(b, reference, quantity) for b in baselines]
        seen = [quantity_error(w, reference, quantity) for w in witnesses]
    else:
        scale = error_scale(judged, reference, quantity)
        errors = [on_scale(b, reference, quantity, scale) for b in baselines]
        seen = [on_scale(w, reference, quantity, scale) for w in witnesses]
    base = witnessed(max(errors, default=math.inf), seen)
    if judged is None or not base < math.inf:
        return base
    moved = [perturbation_error(p, reference, quantity, scale) for p in perturbed]
    return max([base, *moved])


def on_scale(arrays: Arrays, reference: Arrays, quantity: str, scale: float) -> float:
    """How far ``arrays`` are from ``reference`` on ``quantity``, divided by
    ``scale``: the error a path as far from ``reference`` has when ``scale``
    is the norm its own error is measured on (``error_scale``); ``inf``
    where ``arrays`` lack it or hold a value not finite, 0 when ``scale`` is
    (the path and the reference both exactly 0: it passes anyway)."""
    moved = distance(arrays, reference, quantity)
    if not moved < math.inf:
        return math.inf
    return moved / scale if 0 < scale < math.inf else 0.0


def perturbation_error(
    perturbed: Arrays, reference: Arrays, quantity: str, scale: float
) -> float:
    """How far a perturbed float64 run (``PERTURBED``) moved ``quantity``
    from ``reference``, on ``scale`` (``on_scale``).  So a quantity that
    vanishes in exact arithmetic (a beta ahead of a normalization, a moving
    mean of values centred by one) is allowed what rounding on the scale of
    the terms that cancel moves it, and a value far from it still fails.  0
    (it witnesses nothing) where the run lacks the quantity or moved it to a
    value not finite."""
    moved = on_scale(perturbed, reference, quantity, scale)
    return moved if moved < math.inf else 0.0


def witnessed(base: float, seen: Iterable[float]) -> float:
    """The baseline error an allowance is set from, when the baselines'
    largest is ``base`` and the witnesses' errors are ``seen`` (witnesses:
    the module docstring): a witness counts up to what the baselines alone
    allow, ``allowed(base)``, so witnesses raise an allowance at most
    ``MULTIPLE``-fold and never lower one.  A witness that lacks the
    quantity, or computed a NaN, witnesses nothing; a baseline that lacks it
    still allows nothing."""
    finite = [e for e in seen if e < math.inf]
    if not base < math.inf or not finite:
        return base
    return max(base, min(max(finite), allowed(base)))


def limit(model: str, quantity: str, base: float) -> float:
    """The error allowed on ``quantity`` when the baselines' is ``base``:
    ``allowed``, after a training step of a chaotic model at least
    ``trajectory_floor``; nothing when a baseline lacks the quantity."""
    if not base < math.inf:
        return 0.0
    step = _step(quantity)
    floor = trajectory_floor(model, step) if step is not None else 0.0
    return max(allowed(base), floor)


def judge(
    model: str,
    path: str,
    arrays: Arrays,
    reference: Arrays,
    baselines: Mapping[str, Arrays],
    *,
    witnesses: Sequence[Arrays] = (),
    perturbed: Sequence[Arrays] = (),
) -> PairResult:
    """``path``'s every quantity against the float64 ``reference``, each with
    the allowance of ``baselines`` (float32 runs by implementation; the
    path's own is left out), raised by ``witnesses`` as far as ``witnessed``
    lets them (only after a vote left the path fewer baselines: the module
    docstring) and by the ``perturbed`` float64 runs
    (``perturbation_error``).

    A quantity the reference has and the path lacks (or the path has and the
    reference lacks) counts as an infinite error."""
    mine = baselines_for(path, baselines)
    entries = [
        Entry(
            quantity,
            quantity_error(arrays, reference, quantity),
            limit(
                model,
                quantity,
                baseline_error(
                    mine,
                    reference,
                    quantity,
                    witnesses=witnesses,
                    perturbed=perturbed,
                    judged=arrays,
                ),
            ),
        )
        for quantity in sorted(set(arrays) | set(reference), key=_walking_order)
    ]
    return PairResult(model, path, REFERENCE, tuple(entries))


def _walking_order(quantity: str) -> tuple[int, int, str]:
    """Logits, loss, gradients, then each training step's quantities in step
    order: the order a reader follows a difference in."""
    step = _step(quantity)
    if step is not None:
        return (3, step, quantity)
    kind = {"logits": 0, "loss": 1}.get(quantity.partition(":")[0], 2)
    return (kind, 0, quantity)


def _step(quantity: str) -> int | None:
    """``t`` of a ``step<t>/...`` quantity, else ``None``."""
    head, slash, _ = quantity.partition("/")
    digits = head.removeprefix("step")
    return (
        int(digits) if slash and head.startswith("step") and digits.isdigit() else None
    )


def trajectory_floor(model: str, step: int) -> float:
    """The least error allowed after training step ``step`` of a model whose
    trajectories are chaotic (growth above 1 in
    ``equivalence.compare.TRAJECTORY_TOLERANCE``: VGG16 under Adam at 0.01),
    else 0.  There Adam turns the rounding of nearly-zero gradient entries
    into full-size steps of either sign, so after two steps the baseline's
    own error is one draw of a chaotic process: at batch 16, seed 0,
    native TensorFlow was 8.7e-4 from float64 on a kernel where the baseline
    was 1.8e-5 (m = 48), while after one step every path needed m <= 1.  The
    measured spread of correct paths (``step_tolerance``) bounds it instead."""
    growth = trajectory_tolerance(model)[1]
    return step_tolerance(model, step) if growth > 1 else 0.0


def disagreement(
    model: str,
    first: tuple[Arrays, Arrays],
    second: tuple[Arrays, Arrays],
    perturbed: tuple[Arrays | None, Arrays | None] = (None, None),
) -> str | None:
    """Where two implementations' float64 runs disagree, each given as
    ``(float64 run, float32 baseline)``: the first quantity (in walking
    order) on which they differ by more than ``CROSS_CHECK_SHARE`` of the
    allowance their own baselines set, raised by their own ``perturbed``
    runs (``perturbation_error``), as a phrase; ``None`` when they agree.
    Each baseline and perturbed run is measured against its own
    implementation's float64 run, so a fault in one implementation's code
    (in all its runs) does not move the bar."""
    (run_a, base_a), (run_b, base_b) = first, second
    for quantity in sorted(set(run_a) | set(run_b), key=_walking_order):
        error = quantity_error(run_a, run_b, quantity)
        scale = error_scale(run_a, run_b, quantity)
        base = max(
            on_scale(base_a, run_a, quantity, scale),
            on_scale(base_b, run_b, quantity, scale),
        )
        if base < math.inf:
            base = max(
                [
                    base,
                    *(
                        perturbation_error(p, run, quantity, scale)
                        for p, run in zip(perturbed, (run_a, run_b), strict=True)
                        if p is not None
                    ),
                ]
            )
        bar = CROSS_CHECK_SHARE * limit(model, quantity, base)
        if not error <= bar:
            return f"on {quantity} by {error:.1e} (allowed {bar:.1e})"
    return None


@dataclass(frozen=True)
class Vote:
    """What the float64 runs decided: the implementation whose run judges
    (``None`` when no two agree), the implementations that agree with it,
    the odd one out (``None`` when there is none), a sentence for either of
    the last two cases, and for an odd one out what was wrong with it in a
    phrase that names it (``fault``)."""

    reference: str | None
    agreeing: tuple[str, ...]
    odd: str | None = None
    sentence: str | None = None
    fault: str | None = None

    @property
    def sound(self) -> bool:
        """Whether the judges can be trusted: a reference was chosen and
        every implementation voted with it.  An odd one out still lets every
        path be judged (against the others), but one of the tool's own
        reference implementations was found wrong, a failure in itself."""
        return self.reference is not None and self.odd is None


def vote(
    model: str,
    runs: Mapping[str, tuple[Arrays, Arrays]],
    failures: Mapping[str, str] | None = None,
    perturbed: Mapping[str, Arrays] | None = None,
) -> Vote:
    """Which float64 run to judge with.  ``runs``: ``(float64 run, float32
    baseline)`` by implementation; ``failures``: why an implementation has
    none (its float64 or float32 run failed); ``perturbed``: an
    implementation's perturbed float64 run, where it has one.  The reference is the
    implementation agreeing with the most others (ties in
    ``IMPLEMENTATIONS`` order), if it agrees with at least one; an
    implementation that agrees with no other, or failed, is the odd one out
    when it is the only one outside the agreement, and what was wrong with
    it is said (``odd_fault``)."""
    failures = dict(failures or {})
    present = [i for i in IMPLEMENTATIONS if i in runs]
    moved = perturbed or {}
    why = {
        (a, b): disagreement(model, runs[a], runs[b], (moved.get(a), moved.get(b)))
        for a, b in itertools.combinations(present, 2)
    }

    def agrees(a: str, b: str) -> bool:
        return a == b or why.get((a, b), why.get((b, a))) is None

    count = {i: sum(agrees(i, j) for j in present if j != i) for i in present}
    best = max(present, key=lambda i: count[i], default=None)
    if best is None or count[best] == 0:
        pairs = "; ".join(f"{a} against {b} {w}" for (a, b), w in why.items() if w)
        failed = "; ".join(f"{i} failed: {reason}" for i, reason in failures.items())
        return Vote(
            None,
            (),
            sentence=(
                f"no two float64 runs of {', '.join(IMPLEMENTATIONS)} agree "
                f"({'; '.join(s for s in (pairs, failed) if s)}), so no path can "
                "be judged"
            ),
        )
    agreeing = tuple(i for i in present if agrees(best, i))
    outside = [i for i in IMPLEMENTATIONS if i not in agreeing]
    others = " and ".join(agreeing)
    if len(outside) != 1:
        return Vote(best, agreeing)
    odd = outside[0]
    if odd in failures:
        fault = f"{odd} cannot vote: its reference runs failed"
        verdict = f"{fault} ({failures[odd]})"
    else:
        fault, evidence = odd_fault(model, odd, runs, agreeing)
        where = why.get((best, odd), why.get((odd, best)))
        verdict = (
            f"{fault}: {evidence + '; ' if evidence else ''}its float64 run "
            f"disagrees with {others}, which agree, {where}"
        )
    return Vote(
        best,
        agreeing,
        odd,
        f"{verdict}; every path is judged against {best}'s float64 run",
        fault,
    )


def odd_fault(
    model: str,
    odd: str,
    runs: Mapping[str, tuple[Arrays, Arrays]],
    agreeing: tuple[str, ...],
) -> tuple[str, str | None]:
    """What was wrong with ``odd``, whose float64 run ``agreeing`` (the
    first of them the reference) contradict: a phrase naming it, and the
    measured fact behind it (``None`` for wrong model code).

    A float64 run that returned arrays of a narrower float dtype computed in
    it: a dtype fault (its model code may be wrong too, when it is farther
    off than float32 rounding explains).  One that returned float64 arrays
    but is no closer to the reference than a float32 computation (it passes
    as a float32 path would, ``MULTIPLE``, where float64 runs that agree do
    so to ~1e-15) computed in float32 somewhere: a dtype fault too.  Anything
    farther off is the model code."""
    run, reference = runs[odd][0], runs[agreeing[0]][0]
    baselines = {i: runs[i][1] for i in agreeing}
    m = needed_multiple(judge(model, odd, run, reference, baselines))
    dtypes = {q: np.asarray(a).dtype for q, a in run.items()}
    floats = [q for q in sorted(run, key=_walking_order) if dtypes[q].kind == "f"]
    narrow = [q for q in floats if dtypes[q].itemsize < 8]
    if narrow:
        kinds = " and ".join(sorted({str(dtypes[q]) for q in narrow}))
        shown = ", ".join(narrow[:2]) + (", ..." if len(narrow) > 2 else "")
        evidence = (
            f"it returned {kinds} arrays for {len(narrow)} of its {len(floats)} "
            f"quantities ({shown})"
        )
        if kinds == "float32" and m > MULTIPLE:
            return (
                f"{odd}'s float64 run computed in float32 (a dtype fault), and "
                f"its model code may be wrong too",
                f"{evidence}, and it is farther off than float32 rounding "
                f"explains (m = {m:.3g})",
            )
        return (
            f"{odd}'s float64 run computed in {kinds} (a dtype fault, not its "
            "model code)",
            evidence,
        )
    if m <= MULTIPLE:
        agree = max(
            (
                quantity_error(reference, runs[i][0], q)
                for i in agreeing[1:]
                for q in set(reference) | set(runs[i][0])
            ),
            default=0.0,
        )
        return (
            f"{odd}'s float64 run computed in float32 somewhere (a dtype fault, "
            "not its model code)",
            f"it is as far from {agreeing[0]}'s float64 run as a float32 "
            f"computation (m = {m:.3g}), where {' and '.join(agreeing)} agree "
            f"to {agree:.1e}",
        )
    return f"{odd}'s model code is wrong", None


def allowance_baselines(path: str, agreeing: Iterable[str]) -> tuple[str, ...]:
    """The implementations whose float32 baselines set ``path``'s allowance
    when ``agreeing`` vote together: all of them but its own."""
    own = own_implementation(path)
    return tuple(i for i in agreeing if i != own)


def allowance_note(
    decided: Vote, path: str, witnesses: Sequence[str] = ()
) -> str | None:
    """The float32 baselines ``path``'s allowance rested on, as a phrase,
    when an odd one out left it fewer than a full vote would
    (``native-tensorflow's float32 baseline alone``), with the ``witnesses``
    that stood in for the lost one (``WITNESSES``); else ``None``."""
    if decided.reference is None or decided.odd is None:
        return None
    mine = allowance_baselines(path, decided.agreeing)
    if len(mine) >= len(allowance_baselines(path, IMPLEMENTATIONS)):
        return None
    named = " and ".join(f"{i}'s" for i in mine)
    note = f"{named} float32 baseline{'s' if len(mine) > 1 else ''}"
    if witnesses:
        many = len(witnesses) > 1
        return f"{note} and {len(witnesses)} witness{'es' if many else ''}"
    return note if len(mine) > 1 else f"{note} alone"


def thinned(
    decided: Vote,
    paths: Iterable[str],
    witnesses: Mapping[str, Sequence[str]] | None = None,
) -> str | None:
    """One sentence, when an odd one out is dropped: on which float32
    baselines the allowances of ``paths`` now rest, and which paths
    witnessed for them (``witnesses``, by path; ``WITNESSES``), the paths
    left with one baseline alone named first (one float32 computation's luck
    is all such an allowance holds; docs/equivalence.md); ``None`` when
    every implementation voted."""
    witnesses = witnesses or {}
    groups: dict[str, list[str]] = {}
    for path in paths:
        note = allowance_note(decided, path, witnesses.get(path, ()))
        if note is not None:
            groups.setdefault(note, []).append(path)
    if not groups:
        return None
    ordered = sorted(groups.items(), key=lambda item: not item[0].endswith("alone"))
    named = "; ".join(f"{note} for {', '.join(group)}" for note, group in ordered)
    said = (
        f"with {decided.odd} out of the vote, allowances rest on fewer float32 "
        f"baselines: {named}"
    )
    seen = dict.fromkeys(
        w
        for group in groups.values()
        for path in group
        for w in witnesses.get(path, ())
    )
    if seen:
        said += (
            f"; witnesses: {', '.join(sorted(seen))} (paths that passed, each "
            "witnessing for the paths of other frameworks, its error counted "
            f"up to {MULTIPLE:g} times what the baselines allow)"
        )
    return said


def per_step(trajectory: Arrays) -> dict[str, np.ndarray]:
    """A trajectory (``workers.runs.trajectory``) with its ``loss`` vector
    split into one ``step<t>/loss`` per step, so each step is judged alone."""
    arrays = {k: v for k, v in trajectory.items() if k != "loss"}
    for t, loss in enumerate(np.atleast_1d(trajectory.get("loss", [])), start=1):
        arrays[f"step{t}/loss"] = np.asarray([loss])
    return arrays


def needed_multiple(result: PairResult) -> float:
    """The multiple of ``baseline error + FLOOR`` that ``result`` (from
    ``judge``) needed on its worst quantity, its "m" (``inf`` for a missing
    quantity or a NaN)."""
    return max(
        (
            MULTIPLE * e.error / e.tolerance if e.tolerance > 0 else math.inf
            for e in result.entries
        ),
        default=0.0,
    )
