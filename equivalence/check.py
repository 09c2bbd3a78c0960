"""Run every path on the same canonical weights and batches, judge each against
a float64 reference, and compare all pairs as a diagnostic.

A case is one forward and backward pass on the first mini-batch and, when
``steps`` is set, a training trajectory of that many optimizer steps on the
same mini-batches.  Three reference implementations run it in float64 and in
float32; the float64 runs vote on the reference and name an odd one out,
and every path's every quantity is judged against the reference, allowing a
multiple of the largest error the float32 runs make
(``equivalence.reference``); so a verdict never depends on which other paths
were chosen.  A case passes when every path passes and no reference
implementation was found wrong (``ModelReport.ok``).  A path that fails, and
an odd one out, is localized against the reference: the first layer where
the two part ways (``equivalence.localize``).  The pairwise table (every
pair of paths, fixed tolerances, ``equivalence.compare``) is kept for
reading, not for verdicts.  With ``repeat``, each path evaluates the case
twice in its process and the report says whether the bits were identical.
``accuracy`` trains on real digits and compares the test accuracy every path
reaches.

Framework-free: the paths run in workers (``workers.launch``), one process per
path kept open across models and cases, so Hypothesis can draw many cases
without paying each framework's import again.  Workers run with fast-math
modes off and deterministic algorithms on (``workers.numerics``).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np

from equivalence import keras_known
from equivalence.compare import (
    TOLERANCES,
    PairResult,
    compare,
    compare_trajectory,
    quantity_error,
)
from equivalence.localize import Localization, Triple, localize
from equivalence.reference import (
    CROSS_CHECK_SHARE,
    IMPLEMENTATIONS,
    PERTURBED,
    Vote,
    allowance_baselines,
    allowance_note,
    judge,
    needed_multiple,
    own_implementation,
    per_step,
    thinned,
    vote,
)
from native.compose import PERTURB_ENV
from workers.launch import Reply, Worker, thread_environment
from workers.messages import (
    Accuracy,
    AccuracyAnswer,
    Activations,
    ArraysAnswer,
    Evaluate,
    Trajectory,
)
from workers.paths import OPTIONAL_FRAMEWORKS, get_path
from zoo.arrays import digest, load_npz, save_npz
from zoo.data import make_batches
from zoo.digits import digit_epochs
from zoo.models import get_spec
from zoo.specs import ModelSpec
from zoo.weights import weights_file

Results = dict[str, dict[str, np.ndarray]]  # arrays per path
_Answer = tuple[Reply, dict[str, np.ndarray] | None]  # a reply, the arrays written


# The LSTM's second case: short enough that its first time step still moves
# the logits (at the workload's 250, skipping step 1 moves them by 1.6e-7).
SHORT_SEQ_LEN = 12
# ``infer-only``: a path whose training alone fails (``ModelReport.shown_verdict``,
# the gate's ``harness.core.gate.INFER_ONLY``).
INFER_ONLY = "infer-only"
VERDICT_ORDER = ("pass", "unavailable", INFER_ONLY, "unchecked", "fail", "error")
# How many worker processes compute at once during a check: one per CPU this
# process may use.  Each request goes to another process, so they cannot
# change each other's results; only the wall time of a check changes.
SIDE_BY_SIDE = len(os.sched_getaffinity(0))
# ... each with one intra-op thread: one thread per CPU, where each worker
# spreading over every CPU had them spin against each other (measured here,
# the ffn, LeNet and LSTM draws: 10% less CPU time; docs/testing.md).  A
# worker started to stand in for a checker's (a float32 run alone) is
# started with this environment too, so that it computes the same bits.
WORKER_ENV: dict[str, str] = thread_environment({"intra_op": 1, "inter_op": 1})["env"]
_T = TypeVar("_T")


def seq_lens(model: str, given: int | None = None) -> list[int | None]:
    """The sequence lengths to check ``model`` at: ``given``, or else for a
    model that takes sequences of any length (an LSTM's: ``free_length``)
    the workload's (``None``) and ``SHORT_SEQ_LEN``; other models only at
    their own input's (a ``Flatten`` over ``(28, 28)`` images fixes it)."""
    if not get_spec(model).free_length:
        return [None]
    return [given] if given is not None else [None, SHORT_SEQ_LEN]


def worst_verdict(verdicts: Iterable[str]) -> str:
    """The worst of several cases' verdicts for one path (a path passes a
    model only when it passed every case)."""
    return max(verdicts, key=VERDICT_ORDER.index, default="unchecked")


@dataclass(frozen=True)
class Case:
    """One equivalence case: a model, a seed for weights and data, a batch
    size, for sequence models a sequence length (``None``: the spec's), a
    factor on the inputs, and the number of training steps to compare (0: the
    forward and backward pass only)."""

    model: str
    seed: int = 0
    batch_size: int = 8
    seq_len: int | None = None
    input_scale: float = 1.0
    steps: int = 0

    def describe(self) -> str:
        text = f"model={self.model!r}, seed={self.seed}, batch_size={self.batch_size}"
        if self.seq_len is not None:
            text += f", seq_len={self.seq_len}"
        if self.input_scale != 1.0:
            text += f", input_scale={self.input_scale!r}"
        return text + (f", steps={self.steps}" if self.steps else "")

    def command(self) -> str:
        """The command line that replays this case."""
        text = (
            f"python -m equivalence --models {self.model} --seed {self.seed} "
            f"--batch-size {self.batch_size} --steps {self.steps} --epochs 0"
        )
        if self.seq_len is not None:
            text += f" --seq-len {self.seq_len}"
        if self.input_scale != 1.0:
            text += f" --input-scale {self.input_scale!r}"
        return text


def missing_framework(path: str, reply: Reply) -> bool:
    """Whether ``reply`` says that ``path``'s framework is not installed here
    (its interpreter cannot start, or cannot import the framework), and the
    framework is one that may be missing (``OPTIONAL_FRAMEWORKS``: MXNet,
    which cannot install everywhere).  Any other failure to start, a crash in
    the project's own code included, is an error, never a pass."""
    framework = get_path(path).framework
    error = reply.error or ""
    return (
        reply.status == "unavailable"
        and framework in OPTIONAL_FRAMEWORKS
        and (
            error.startswith("cannot start")
            or error == f"ModuleNotFoundError: No module named '{framework}'"
        )
    )


@dataclass
class ModelReport:
    """One case: every path's outcome and its judgement against float64
    (``judgements``, evaluate and trajectory together; ``multiples``: the
    multiple of the float32 baseline's error each path needed), the pairwise
    diagnostic, verdicts, localizations, each path's arrays and, with
    ``repeat``, how far a second evaluation in the same process landed from
    the first (0.0: identical bits)."""

    case: Case
    outcomes: dict[str, Reply] = field(default_factory=dict)
    pairs: list[PairResult] = field(default_factory=list)
    trajectory_pairs: list[PairResult] = field(default_factory=list)
    judgements: dict[str, PairResult] = field(default_factory=dict)
    multiples: dict[str, float] = field(default_factory=dict)
    repeat_errors: dict[str, float] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)
    localizations: dict[str, Localization] = field(default_factory=dict)
    # the float64 runs' vote: which one judges, and an odd one out
    vote: Vote | None = None
    # set when no two float64 runs agree: why no path was judged
    reference_error: str | None = None
    # where the odd one out's float64 run parts from the reference's
    odd_localization: Localization | None = None
    # what each path computed: its Evaluate and Trajectory arrays
    evaluated: Results = field(default_factory=dict, repr=False)
    trajectories: Results = field(default_factory=dict, repr=False)
    # the float64 reference's arrays (evaluation and ``step<t>/...``), once
    # the vote chose one: what a finding shows as the expected values
    expected: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    # the paths whose float32 runs witnessed rounding for a path whose
    # allowance an odd one out thinned (``equivalence.reference``, witnesses)
    witnesses: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # whether the perturbed float64 runs were asked for (``PERTURBED``: only
    # when the float32 baselines alone left a failure or a split vote)
    consulted_perturbed: bool = False

    @property
    def paths_pass(self) -> bool:
        """A reference was chosen, every path passed its judgement, and no
        path failed to produce its arrays (one whose optional framework is
        not installed here excepted)."""
        return self.reference_error is None and all(
            v in ("pass", "unavailable") for v in self.verdicts.values()
        )

    @property
    def reference_sound(self) -> bool:
        """The judges can be trusted: every reference implementation ran and
        voted with the reference (``Vote.sound``).  With an odd one out every
        path is still judged, against the others, but one of the tool's own
        float64 implementations was found wrong."""
        return self.vote is not None and self.vote.sound

    @property
    def ok(self) -> bool:
        """The case passed: every path passed (``paths_pass``) and its judges
        were sound (``reference_sound``).  Either alone fails it: a wrong
        reference implementation is a failure of the tool's own trust, even
        when every path it judged passed."""
        return self.paths_pass and self.reference_sound

    def allowance_note(self, path: str) -> str | None:
        """On which float32 baselines (and witnesses) ``path``'s allowance
        rested, when an odd one out left it fewer (``None``: a full vote)."""
        if self.vote is None:
            return None
        return allowance_note(self.vote, path, self.witnesses.get(path, ()))

    def thinned(self) -> str | None:
        """The sentence saying which allowances an odd one out left resting
        on fewer float32 baselines, and what witnessed for them (``None``:
        every implementation voted)."""
        if self.vote is None:
            return None
        return thinned(self.vote, self.verdicts, self.witnesses)

    def failing(self, path: str) -> list[str]:
        """The quantities ``path`` has beyond their allowance."""
        judged = self.judgements.get(path)
        return [e.quantity for e in judged.failures] if judged is not None else []

    def trains_wrong_only(self, path: str) -> bool:
        """Whether every quantity ``path`` failed on is one of a training
        step (``step<t>/...``): its logits, loss and gradients agree with
        float64 and only its optimizer's update does not (the gate's
        ``infer-only``: its inference is timed, its training held back)."""
        failing = self.failing(path)
        return bool(failing) and all(q.startswith("step") for q in failing)

    def shown_verdict(self, path: str) -> str:
        """``path``'s verdict as the gate would give it: ``infer-only`` for
        a ``fail`` of its training steps alone."""
        verdict = self.verdicts.get(path, "error")
        return (
            INFER_ONLY
            if verdict == "fail" and self.trains_wrong_only(path)
            else verdict
        )

    def notes(self, path: str) -> list[str]:
        """What Keras is known to compute differently on this path
        (``equivalence.keras_known``): by-design differences, and the Keras
        bug its failures are, if they are exactly one's, or the error it
        stopped with is."""
        reply = self.outcomes.get(path)
        stopped = self.verdicts.get(path) == "error" and reply is not None
        error = (reply.error or "") if stopped and reply is not None else ""
        return keras_known.notes(
            get_spec(self.case.model), path, self.failing(path), error
        )


@dataclass
class AccuracyReport:
    """Test accuracy after every epoch of training on real digits, per path."""

    model: str
    curves: dict[str, list[float]] = field(default_factory=dict)
    outcomes: dict[str, Reply] = field(default_factory=dict)

    @property
    def spread(self) -> float:
        """Largest minus smallest final accuracy across paths."""
        finals = [c[-1] for c in self.curves.values()]
        return max(finals) - min(finals) if finals else 0.0


def _merged(result: PairResult, more: PairResult | None) -> PairResult:
    if more is None:
        return result
    return dataclasses.replace(result, entries=result.entries + more.entries)


def _repeat_error(first: dict[str, np.ndarray], second: dict[str, np.ndarray]) -> float:
    """0.0 when two evaluations gave identical bits, else their largest
    normwise relative difference."""
    if first.keys() == second.keys() and all(
        np.array_equal(first[k], second[k]) for k in first
    ):
        return 0.0
    keys = set(first) | set(second)
    return max(quantity_error(first, second, k) for k in keys)


def _raised(report: ModelReport, path: str) -> str | None:
    """Why ``path`` has no arrays to walk, when its evaluation (or, in a
    case with training steps, its training run) raised: the error's first
    line, as its reply gives it; ``None`` when both ran."""
    ran = path in report.evaluated and (
        not report.case.steps or path in report.trajectories
    )
    if ran:
        return None
    what = "evaluation" if path not in report.evaluated else "training run"
    reply = report.outcomes.get(path)
    said = (reply.error or reply.status) if reply is not None else "no reply"
    first = said.strip().splitlines()[0][:300] if said.strip() else "no reply"
    return f"its {what} raised ({reply.status if reply else '?'}): {first}"


def _contradiction(
    activations: dict[str, np.ndarray],
    evaluated: dict[str, np.ndarray],
    spec: ModelSpec,
) -> str | None:
    """A sentence when a path's tapped forward pass (op by op; each output
    layer's tap is that output) and its evaluated one (as it trains and
    infers, compiled where it compiles) disagree on an output's logits:
    then the layer-by-layer walk cannot see the difference, which lies in
    code only the evaluated pass runs."""
    several = spec.several_outputs
    for head in spec.heads:
        key = f"logits:{head.layer}" if several else "logits"
        if head.layer not in activations or key not in evaluated:
            continue
        error = quantity_error({key: activations[head.layer]}, evaluated, key)
        if error <= TOLERANCES["logits"]:
            continue
        which = f" of output {head.layer!r}" if several else ""
        return (
            f"its tapped forward pass and its evaluated one disagree on the logits"
            f"{which} (error {error:.1e}): the difference is in code only the "
            "evaluated pass runs (a compiled graph), which the layer-by-layer walk "
            "cannot see"
        )
    return None


def _side_by_side(jobs: dict[str, Callable[[], _T]]) -> dict[str, _T]:
    """Each job's result by name, in the order given; the jobs (each a call
    to a different worker process, waited on here) run ``SIDE_BY_SIDE`` at
    a time."""
    if SIDE_BY_SIDE <= 1 or len(jobs) <= 1:
        return {name: job() for name, job in jobs.items()}
    with ThreadPoolExecutor(min(SIDE_BY_SIDE, len(jobs))) as pool:
        futures = {name: pool.submit(job) for name, job in jobs.items()}
        return {name: future.result() for name, future in futures.items()}


def _read_only(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``arrays``, locked against writes: an answer may be given again."""
    for array in arrays.values():
        array.flags.writeable = False
    return arrays


def run_name(implementation: str, dtype: str) -> str:
    """The name of a reference run (and of its worker):
    ``native-jax.float64``."""
    return f"{implementation}.{dtype}"


@dataclass(frozen=True)
class ReferenceRun:
    """One reference run's arrays: its evaluation, and its trajectory split
    per step (``None`` for a case without training steps)."""

    evaluated: dict[str, np.ndarray]
    trajectory: dict[str, np.ndarray] | None

    @property
    def merged(self) -> dict[str, np.ndarray]:
        return {**self.evaluated, **(self.trajectory or {})}


def _vote(model: str, runs: dict[str, ReferenceRun], failures: dict[str, str]) -> Vote:
    """``equivalence.reference.vote`` over the implementations whose float64
    and float32 runs both gave arrays, with their perturbed runs; the others
    count as failed."""
    pairs, failed = {}, {}
    for impl in IMPLEMENTATIONS:
        names = [run_name(impl, dtype) for dtype in ("float64", "float32")]
        if all(n in runs for n in names):
            pairs[impl] = (runs[names[0]].merged, runs[names[1]].merged)
        else:
            failed[impl] = "; ".join(
                f"{n}: {failures[n]}" for n in names if n in failures
            )
    return vote(model, pairs, failed, _perturbed(runs, pairs))


def _perturbed(
    runs: Mapping[str, ReferenceRun], implementations: Iterable[str]
) -> dict[str, dict[str, np.ndarray]]:
    """The perturbed float64 runs (``PERTURBED``) of ``implementations``
    that gave arrays."""
    names = {i: run_name(i, PERTURBED) for i in implementations}
    return {i: runs[n].merged for i, n in names.items() if n in runs}


class _Judged:
    """What the vote chose: the float64 run that judges, and the float32
    baselines (of the implementations that agree with it) that set the
    allowances."""

    def __init__(self, decided: Vote, runs: dict[str, ReferenceRun]) -> None:
        if decided.reference is None:
            raise ValueError("no reference was chosen")
        self.label = f"{decided.reference} float64"
        self.reference_name = run_name(decided.reference, "float64")
        self.reference = runs[self.reference_name]
        self.baselines = {
            impl: runs[run_name(impl, "float32")] for impl in decided.agreeing
        }
        # the agreeing implementations' perturbed float64 runs
        self.perturbed = {
            impl: runs[run_name(impl, PERTURBED)]
            for impl in decided.agreeing
            if run_name(impl, PERTURBED) in runs
        }

    @property
    def baselines_merged(self) -> dict[str, dict[str, np.ndarray]]:
        return {impl: run.merged for impl, run in self.baselines.items()}


def _unsettled(report: ModelReport) -> bool:
    """Whether the float32 baselines alone left something a perturbed run
    could change: no two float64 runs agreed, one was the odd one out, or a
    path failed its judgement."""
    decided = report.vote
    return (
        decided is None
        or decided.reference is None
        or decided.odd is not None
        or any(not result.ok for result in report.judgements.values())
    )


def _witnesses(
    report: ModelReport, faults: Mapping[str, str]
) -> dict[str, tuple[str, ...]]:
    """For each path whose allowance an odd one out thinned
    (``allowance_note``), the paths whose float32 runs witness ordinary
    rounding in the lost baseline's place (``equivalence.reference``,
    witnesses): every other path that passed its judgement, ran without a
    deliberate fault and not the odd one's code nor a baseline's (already
    counted), of a framework other than the path's (never its own kernels,
    as never its own implementation's baseline)."""
    decided = report.vote
    if decided is None or decided.reference is None or decided.odd is None:
        return {}
    passed = [
        p
        for p, result in report.judgements.items()
        if result.ok
        and report.outcomes[p].ok
        and p not in faults
        and own_implementation(p) != decided.odd
    ]
    found = {}
    for path in report.judgements:
        if allowance_note(decided, path) is None:
            continue
        framework = get_path(path).framework
        counted = allowance_baselines(path, decided.agreeing)
        mine = tuple(
            w
            for w in passed
            if w != path
            and get_path(w).framework != framework
            and own_implementation(w) not in counted
        )
        if mine:
            found[path] = mine
    return found


def _judged_arrays(report: ModelReport, path: str) -> dict[str, np.ndarray]:
    """What ``path`` computed, as ``judge`` reads it: its evaluation and
    every training step's quantities."""
    return {
        **report.evaluated.get(path, {}),
        **per_step(report.trajectories.get(path, {})),
    }


def _judge(
    report: ModelReport, judged: _Judged, path: str, witnesses: Iterable[str] = ()
) -> PairResult:
    """``path``'s arrays judged against the float64 run the vote chose, with
    the baselines' allowances raised by ``witnesses`` (paths of
    ``report``)."""
    return judge(
        report.case.model,
        path,
        _judged_arrays(report, path),
        judged.reference.merged,
        judged.baselines_merged,
        witnesses=[_judged_arrays(report, w) for w in witnesses],
        perturbed=[run.merged for run in judged.perturbed.values()],
    )


def decide(
    report: ModelReport,
    runs: dict[str, ReferenceRun],
    failures: dict[str, str],
    faults: Mapping[str, str] | None = None,
) -> _Judged | None:
    """Let the reference runs (``runs``, by ``run_name``; ``failures``: why
    the others stopped) vote, and judge every path of ``report`` (its
    ``outcomes``, ``evaluated`` and ``trajectories``) against the float64 run
    they chose: fills its ``vote``, ``reference_error``, ``judgements``,
    ``multiples``, ``witnesses`` and ``verdicts``.  A path whose allowance
    an odd one out thinned is judged again with its witnesses
    (``_witnesses``; ``faults``: the paths given a deliberate fault, never
    a witness).  The judges, or ``None`` when no two float64 runs agreed.
    Reads arrays only: no worker is asked."""
    report.vote = _vote(report.case.model, runs, failures)
    report.reference_error = (
        report.vote.sentence if report.vote.reference is None else None
    )
    judged = _Judged(report.vote, runs) if report.vote.reference else None
    if judged is not None:
        report.expected = judged.reference.merged
        for path in report.evaluated:
            report.judgements[path] = _judge(report, judged, path)
        # witnesses are the paths that passed without them: judged once more
        report.witnesses = _witnesses(report, faults or {})
        for path, names in report.witnesses.items():
            report.judgements[path] = _judge(report, judged, path, names)
        for path, result in report.judgements.items():
            report.multiples[path] = needed_multiple(result)
    # pass/fail from the judgement; error for a path that failed to run (or
    # to start, unless its optional framework is not installed here:
    # unavailable), and for every path when no two float64 runs agreed
    for path, outcome in report.outcomes.items():
        found = report.judgements.get(path)
        if missing_framework(path, outcome):
            report.verdicts[path] = "unavailable"
        elif not outcome.ok or found is None:
            report.verdicts[path] = "error"
        else:
            report.verdicts[path] = "pass" if found.ok else "fail"
    return judged


class _Taps:
    """Each worker's tapped forward pass (``Activations``), asked for once,
    with the fault its evaluation had."""

    def __init__(
        self,
        checker: Checker,
        request: Activations,
        faults: dict[str, str],
        source_faults: dict[str, str],
    ) -> None:
        self.checker, self.request = checker, request
        self.faults, self.source_faults = faults, source_faults
        self.taken: dict[str, tuple[dict[str, np.ndarray], str | None]] = {}
        self.ran: dict[str, bool] = {}  # the pass ran (it may have stopped)

    def get(self, name: str) -> tuple[dict[str, np.ndarray], str | None]:
        """The activations of a path or reference run (by ``run_name``) and
        the error that stopped its forward pass, if one did."""
        if name not in self.taken:
            if name in self.checker.workers:
                fault = self.faults.get(name)
            else:
                fault = self.source_faults.get(name.rsplit(".", maxsplit=1)[0])
            reply, arrays = self.checker._call(
                name, dataclasses.replace(self.request, fault=fault)
            )
            answer = reply.answer
            error = answer.error if isinstance(answer, ArraysAnswer) else None
            self.taken[name] = (arrays or {}, error or reply.error)
            self.ran[name] = arrays is not None
        return self.taken[name]


def _reference_worker(implementation: str, dtype: str) -> Worker:
    """A worker running ``implementation`` in ``dtype``, or in float64
    perturbed (``PERTURBED``)."""
    env = {**WORKER_ENV, "HARNESS_NATIVE_DTYPE": dtype}
    if dtype == PERTURBED:
        env.update({"HARNESS_NATIVE_DTYPE": "float64", PERTURB_ENV: "1"})
    return Worker(implementation, env=env, deterministic=True)


def _reuse(
    report: ModelReport, faults: dict[str, str], source_faults: dict[str, str]
) -> dict[str, ReferenceRun]:
    """The float32 baselines a path already computed, by ``run_name``: an
    implementation's own path in its default mode, given no fault but the
    one in its code, runs the very code and settings its float32 worker
    would, so its arrays are that run's."""
    steps = bool(report.case.steps)
    reused = {}
    for impl in IMPLEMENTATIONS:
        if faults.get(impl) != source_faults.get(impl):
            continue
        if impl not in report.evaluated or (steps and impl not in report.trajectories):
            continue
        trajectory = per_step(report.trajectories[impl]) if steps else None
        reused[run_name(impl, "float32")] = ReferenceRun(
            report.evaluated[impl], trajectory
        )
    return reused


def _triple(run: ReferenceRun, activations: dict[str, np.ndarray]) -> Triple:
    return (activations, run.evaluated, run.trajectory)


def _localize_odd(
    spec: ModelSpec,
    decided: Vote,
    judged: _Judged,
    runs: dict[str, ReferenceRun],
    taps: _Taps,
) -> Localization:
    """Where the odd one out's float64 run first parts from the reference's,
    each layer held to ``CROSS_CHECK_SHARE`` of what a path is allowed."""
    odd = str(decided.odd)
    name = run_name(odd, "float64")
    mine, error = taps.get(name)
    bases = [
        _triple(run, taps.get(run_name(impl, dtype))[0])
        for dtype, runs_of in (
            ("float32", judged.baselines),
            (PERTURBED, judged.perturbed),
        )
        for impl, run in runs_of.items()
    ]
    odd_steps, reference_steps = runs[name].trajectory, judged.reference.trajectory
    trajectory = None
    if odd_steps is not None and reference_steps is not None:
        trajectory = (odd_steps, reference_steps)
    return localize(
        spec,
        f"{odd} float64",
        judged.label,
        activations=(mine, taps.get(judged.reference_name)[0]),
        evaluated=(runs[name].evaluated, judged.reference.evaluated),
        trajectory=trajectory,
        baselines=bases,
        share=CROSS_CHECK_SHARE,
        error=error,
    )


class Checker:
    """Workers for ``paths``, kept open; ``check(case)`` runs and compares them."""

    def __init__(
        self,
        paths: list[str],
        cache_dir: Path | None = None,
        timeout: float = 900.0,
        *,
        repeat: bool = False,
        references_from: Checker | None = None,
    ) -> None:
        """``repeat``: evaluate every case twice in each path's process and
        report whether the bits were identical.  ``references_from``: an open
        checker whose reference workers this one uses too (and leaves to it
        to close), so that two checkers in one process do not hold two sets
        of framework processes."""
        self._tmp = tempfile.TemporaryDirectory(prefix="equivalence-")
        self.work = Path(self._tmp.name)
        self.cache_dir = cache_dir or self.work
        self.timeout = timeout
        self.repeat = repeat
        # started side by side: a framework's import takes seconds
        self.workers = _side_by_side(
            {
                p: functools.partial(Worker, p, env=WORKER_ENV, deterministic=True)
                for p in paths
            }
        )
        # Each reference implementation in float64 and in float32 (its
        # baseline; ``equivalence.reference``), never given a deliberate
        # fault (a source fault excepted: ``check``).  The float64 workers
        # start now; a float32 run is its implementation's own path's
        # (``_reuse``, ``_worker``) unless that path is not open here.
        self._owns_references = references_from is None
        self.references: dict[str, Worker]
        # What each worker answered for the batches last checked, by worker
        # and request (``_call``).  A worker asked the same request without a
        # deliberate fault computes the same bits (``repeat`` shows it), so a
        # case checked again at once (the fault suite checks each case once
        # per faulty path, one after another) asks each worker only what is
        # new.  Only the last batches' answers are kept: a VGG16 trajectory's
        # float64 parameters are hundreds of MB.
        self._answers: dict[tuple[Worker, str, str], _Answer]
        # Paths whose workers may serve a float32 baseline (``_worker``).
        self._baseline_paths = dict(self.workers)
        if references_from is not None:
            self.references = references_from.references
            self._answers = references_from._answers
            self._baseline_paths = {
                **references_from._baseline_paths,
                **self._baseline_paths,
            }
        else:
            self.references = _side_by_side(
                {
                    run_name(impl, "float64"): functools.partial(
                        _reference_worker, impl, "float64"
                    )
                    for impl in IMPLEMENTATIONS
                }
            )
            self._answers = {}
        self._batches_digest = ""

    def __enter__(self) -> Checker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        own = self.references if self._owns_references else {}
        # side by side: a framework's interpreter takes a second or more to exit
        _side_by_side({name: w.close for name, w in {**self.workers, **own}.items()})
        self._tmp.cleanup()

    def _call(self, path: str, request: Evaluate | Activations | Trajectory) -> _Answer:
        """One request to ``path``'s worker (or a reference run's, by
        ``run_name``), its reply and the arrays it wrote (into a file of
        this checker's, whatever ``out`` the request names).  An answer the
        worker gave already for these batches is given again (``_answers``),
        except under ``repeat``, whose point is to ask twice.  A request with
        a deliberate fault is always sent, and makes its worker forget what
        it answered: whatever it computes next is asked anew, so a fault that
        outlived its request would show."""
        worker = self._worker(path)
        key = (worker, self._batches_digest, repr(dataclasses.replace(request, out="")))
        given = None if self.repeat else self._answers.get(key)
        if request.fault is not None:
            self.forget(path)
        elif given is not None:
            return given
        out = self.work / f"{path}-{request.TASK}.npz"
        reply = worker.call(dataclasses.replace(request, out=str(out)), self.timeout)
        written = isinstance(reply.answer, ArraysAnswer) and out.exists()
        answer = (reply, _read_only(load_npz(out)) if written else None)
        if request.fault is None and reply.ok:
            self._answers[key] = answer
        return answer

    def forget(self, path: str) -> None:
        """Drop what ``path``'s worker answered: it is given a deliberate
        fault (here, or by a caller that asks it directly: the gate's timed
        closures), and whatever it computes next must be asked anew."""
        worker = self._worker(path)
        # ``_call``s run side by side: another may be adding its answer now
        for stale in [k for k in list(self._answers) if k[0] is worker]:
            self._answers.pop(stale, None)

    def _worker(self, name: str) -> Worker:
        """The worker of a path, or of a reference run (by ``run_name``).
        An implementation's float32 run goes to its own path's worker when
        one is open (same code, same settings: the same bits; the request
        carries no deliberate fault), else to a worker of its own, started
        on first use."""
        if name in self.workers:
            return self.workers[name]
        implementation, dtype = name.rsplit(".", maxsplit=1)
        path = self._baseline_paths.get(implementation)
        if dtype == "float32" and path is not None and path.failure is None:
            return path
        if name not in self.references:
            self.references[name] = _reference_worker(implementation, dtype)
        return self.references[name]

    def _run_all(
        self,
        report: ModelReport,
        request: Evaluate | Trajectory,
        faults: dict[str, str],
        paths: list[str],
    ) -> Results:
        # A path that failed an earlier task already is not asked again.
        todo = [p for p in paths if p not in report.outcomes or report.outcomes[p].ok]
        calls = _side_by_side(
            {
                path: functools.partial(
                    self._call,
                    path,
                    dataclasses.replace(request, fault=faults.get(path)),
                )
                for path in todo
            }
        )
        results = {}
        for path, (reply, arrays) in calls.items():
            report.outcomes[path] = reply
            if arrays is not None:
                results[path] = arrays
        return results

    def _run_references(
        self,
        requests: list[Evaluate | Trajectory],
        source_faults: dict[str, str],
        reused: dict[str, ReferenceRun],
        names: list[str] | None = None,
    ) -> tuple[dict[str, ReferenceRun], dict[str, str]]:
        """Every reference run's arrays (or those ``names`` names: a
        perturbed run) for ``requests`` (a trajectory's split per step), and
        why a run failed, by ``run_name``; ``reused``: runs a path already
        made (``_reuse``)."""
        runs: dict[str, ReferenceRun] = dict(reused)
        failures: dict[str, str] = {}
        if names is None:
            names = [
                run_name(i, d) for i in IMPLEMENTATIONS for d in ("float64", "float32")
            ]
        done = _side_by_side(
            {
                name: functools.partial(
                    self._reference_run,
                    name,
                    requests,
                    source_faults.get(name.rsplit(".", maxsplit=1)[0]),
                )
                for name in names
                if name not in reused
            }
        )
        for name, run in done.items():
            if isinstance(run, str):
                failures[name] = run
            else:
                runs[name] = run
        return runs, failures

    def _judge_all(
        self,
        report: ModelReport,
        requests: list[Evaluate | Trajectory],
        faults: dict[str, str],
        source_faults: dict[str, str],
    ) -> tuple[dict[str, ReferenceRun], _Judged | None]:
        """The reference runs of ``requests`` and ``decide`` over them: the
        runs by ``run_name`` and the judges.  A perturbed run only raises
        allowances and bars, so a case every path passed under a full vote
        passes with it too: it is asked for only when something did not
        (``_unsettled``), which gives the verdicts of always asking for it
        at no cost to a case that passes.  One run, of the reference
        implementation (of the first when no two agreed): its perturbations
        are drawn, not its kernels' luck, so one implementation's serves."""
        reused = _reuse(report, faults, source_faults)
        runs, failures = self._run_references(requests, source_faults, reused)
        judged = decide(report, runs, failures, faults)
        if _unsettled(report):
            which = report.vote.reference if report.vote else None
            name = run_name(which or IMPLEMENTATIONS[0], PERTURBED)
            more, failed = self._run_references(requests, source_faults, {}, [name])
            runs.update(more)
            failures.update(failed)
            report.consulted_perturbed = True
            report.judgements, report.multiples, report.witnesses = {}, {}, {}
            judged = decide(report, runs, failures, faults)
        return runs, judged

    def _reference_run(
        self, name: str, requests: list[Evaluate | Trajectory], fault: str | None
    ) -> ReferenceRun | str:
        """One reference run (by ``run_name``) of ``requests`` in order, or
        why it stopped."""
        parts = []
        for request in requests:
            reply, arrays = self._call(name, dataclasses.replace(request, fault=fault))
            if arrays is None:
                return f"{reply.error or reply.status}"
            parts.append(
                per_step(arrays) if isinstance(request, Trajectory) else arrays
            )
        return ReferenceRun(parts[0], parts[1] if len(parts) > 1 else None)

    def check(
        self,
        case: Case,
        faults: dict[str, str] | None = None,
        source_faults: dict[str, str] | None = None,
        paths: Iterable[str] | None = None,
    ) -> ModelReport:
        """Run ``case`` on every path (or those of ``paths``, each one this
        checker has a worker for) and on the reference implementations, let
        the float64 runs vote on the reference, and judge every path against
        it.  ``faults`` maps a path to a deliberate fault (``native.faults``)
        to prove the checks catch it; ``source_faults`` maps a reference
        implementation to one that enters its code, as an edit would: its
        path and its float64 and float32 runs all get it."""
        asked = list(self.workers if paths is None else paths)
        unknown = [p for p in asked if p not in self.workers]
        if unknown:
            raise ValueError(f"this checker has no worker for {', '.join(unknown)}")
        source_faults = source_faults or {}
        faults = {**(faults or {}), **source_faults}
        spec = get_spec(case.model)
        weights = weights_file(spec, case.seed, self.cache_dir)
        shape = spec.input_shape
        if case.seq_len is not None:
            shape = (case.seq_len, *spec.input_shape[1:])
        x, y = make_batches(
            spec, case.seed, case.batch_size, max(case.steps, 1), input_shape=shape
        )
        data = self.work / "batches.npz"
        # Token ids are ids at any scale: only float inputs are scaled.
        scaled = x if spec.tokens else x * np.float32(case.input_scale)
        batches = {"x": scaled, "y": y}
        save_npz(data, batches)
        self._batches_digest = digest(batches)
        for key in [k for k in self._answers if k[1] != self._batches_digest]:
            del self._answers[key]
        report = ModelReport(case)
        evaluate = Evaluate(
            model=case.model, weights=str(weights), data=str(data), out=""
        )
        evaluated = self._run_all(report, evaluate, faults, asked)
        if self.repeat:
            again = self._run_all(report, evaluate, faults, asked)
            report.repeat_errors = {
                p: _repeat_error(evaluated[p], again[p]) for p in again
            }
        for a, b in itertools.combinations(evaluated, 2):
            report.pairs.append(compare(case.model, a, evaluated[a], b, evaluated[b]))
        requests: list[Evaluate | Trajectory] = [evaluate]
        trajectories: Results = {}
        if case.steps:
            trajectory = Trajectory(
                model=case.model, weights=str(weights), data=str(data), out=""
            )
            requests.append(trajectory)
            trajectories = self._run_all(report, trajectory, faults, asked)
            for a, b in itertools.combinations(trajectories, 2):
                report.trajectory_pairs.append(
                    compare_trajectory(
                        case.model, a, trajectories[a], b, trajectories[b]
                    )
                )
        report.evaluated, report.trajectories = evaluated, trajectories
        runs, judged = self._judge_all(report, requests, faults, source_faults)
        activations = Activations(
            model=case.model, weights=str(weights), data=str(data), out=""
        )
        taps = _Taps(self, activations, faults, source_faults)
        if judged is not None and report.vote is not None:
            self._localize(report, judged, taps)
            odd = report.vote.odd
            if odd is not None and run_name(odd, "float64") in runs:
                report.odd_localization = _localize_odd(
                    spec, report.vote, judged, runs, taps
                )
        return report

    def _localize(self, report: ModelReport, judged: _Judged, taps: _Taps) -> None:
        """Localize every failing path against the float64 reference, each
        layer allowed what ``equivalence.reference`` allows it, from the
        float32 baselines' error at that layer (its own implementation's
        left out)."""
        spec = get_spec(report.case.model)
        failing = [p for p, v in report.verdicts.items() if v in ("fail", "error")]
        for path in failing:
            outcome = report.outcomes.get(path)
            if outcome is None or outcome.status == "unavailable":
                continue  # it never started; its failure says why
            # an evaluation that raised has no arrays past the forward pass:
            # only its taps are walked (issue 65: a dropout check that raised
            # was read as an infinite loss error, with a contradiction)
            raised = _raised(report, path)
            mine, error = taps.get(path)
            own = own_implementation(path)
            bases = [
                _triple(run, taps.get(run_name(impl, dtype))[0])
                for dtype, runs in (
                    ("float32", judged.baselines),
                    (PERTURBED, judged.perturbed),
                )
                for impl, run in runs.items()
                if impl != own or dtype == PERTURBED
            ]
            witnesses = [
                (
                    taps.get(w)[0],
                    report.evaluated[w],
                    per_step(report.trajectories.get(w, {})),
                )
                for w in report.witnesses.get(path, ())
            ]
            steps = per_step(report.trajectories.get(path, {}))
            report.localizations[path] = localize(
                spec,
                path,
                judged.label,
                activations=(mine, taps.get(judged.reference_name)[0]),
                evaluated=(report.evaluated.get(path, {}), judged.reference.evaluated),
                trajectory=(steps, judged.reference.trajectory)
                if report.case.steps and judged.reference.trajectory is not None
                else None,
                baselines=bases,
                witnesses=witnesses,
                error=error,
                contradiction=None
                if raised
                else _contradiction(mine, report.evaluated.get(path, {}), spec),
                raised=raised,
                tapped=taps.ran[path],
            )

    def accuracy(self, model: str, epochs: int, seed: int = 0) -> AccuracyReport:
        """Train ``model`` for ``epochs`` on real handwritten digits on every
        path, from the same weights and mini-batch order."""
        spec = get_spec(model)
        weights = weights_file(spec, seed, self.cache_dir)
        data = self.work / f"digits-{model}.npz"
        save_npz(data, digit_epochs(spec, seed, epochs))
        report = AccuracyReport(model)
        request = Accuracy(model=model, weights=str(weights), data=str(data))
        for path, worker in self.workers.items():
            reply = worker.call(request, self.timeout)
            report.outcomes[path] = reply
            if isinstance(reply.answer, AccuracyAnswer):
                report.curves[path] = reply.answer.accuracy
        return report
