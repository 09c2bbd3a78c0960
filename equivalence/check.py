"""Run every path on the same canonical weights and batches, judge each against
a float64 reference, and compare all pairs as a diagnostic.

A case is one forward and backward pass on the first mini-batch and, when
``steps`` is set, a training trajectory of that many optimizer steps on the
same mini-batches.  Every path's every quantity is judged against a float64
run of the same case, allowing a multiple of the error a correct float32
computation makes (``equivalence.reference``); so a verdict never depends on
which other paths were chosen.  A path that fails is localized against the
float64 reference: the first layer where the two part ways
(``equivalence.localize``).  The pairwise table (every pair of paths, fixed
tolerances, ``equivalence.compare``) is kept for reading, not for verdicts.
With ``repeat``, each path evaluates the case twice in its process and the
report says whether the bits were identical.  ``accuracy`` trains on real
digits and compares the test accuracy every path reaches.

Framework-free: the paths run in workers (``workers.launch``), one process per
path kept open across models and cases, so Hypothesis can draw many cases
without paying each framework's import again.  Workers run with fast-math
modes off and deterministic algorithms on (``workers.numerics``).
"""

from __future__ import annotations

import dataclasses
import itertools
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from equivalence.compare import (
    TOLERANCES,
    PairResult,
    compare,
    compare_trajectory,
    quantity_error,
)
from equivalence.localize import Localization, localize
from equivalence.reference import (
    BASELINE,
    BASELINE_ENV,
    CROSS_CHECK,
    CROSS_CHECK_PATH,
    REFERENCE,
    REFERENCE_ENV,
    REFERENCE_PATH,
    cross_check,
    judge,
    needed_multiple,
    per_step,
)
from workers.launch import Reply, Worker
from workers.messages import (
    Accuracy,
    AccuracyAnswer,
    Activations,
    ArraysAnswer,
    Evaluate,
    Trajectory,
)
from workers.paths import OPTIONAL_FRAMEWORKS, get_path
from zoo.arrays import load_npz, save_npz
from zoo.data import make_batches
from zoo.digits import digit_epochs
from zoo.specs import get_spec
from zoo.weights import weights_file

Results = dict[str, dict[str, np.ndarray]]  # arrays per path


# The LSTM's second case: short enough that its first time step still moves
# the logits (at the workload's 250, skipping step 1 moves them by 1.6e-7).
SHORT_SEQ_LEN = 12
VERDICT_ORDER = ("pass", "unavailable", "unchecked", "fail", "error")


def seq_lens(model: str, given: int | None = None) -> list[int | None]:
    """The sequence lengths to check ``model`` at: ``given``, or else for the
    LSTM the workload's (``None``) and ``SHORT_SEQ_LEN``; other models have
    none."""
    if get_spec(model).name != "lstm":
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
    reference_error: str | None = None
    # what each path computed: its Evaluate and Trajectory arrays
    evaluated: Results = field(default_factory=dict, repr=False)
    trajectories: Results = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        """The reference ran, every path passed its judgement, and no path
        failed to produce its arrays (one whose optional framework is not
        installed here excepted)."""
        return self.reference_error is None and all(
            v in ("pass", "unavailable") for v in self.verdicts.values()
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


def _contradiction(
    activations: dict[str, np.ndarray], evaluated: dict[str, np.ndarray]
) -> str | None:
    """A sentence when a path's tapped forward pass (op by op) and its
    evaluated one (as it trains and infers, compiled where it compiles)
    disagree on the logits: then the layer-by-layer walk cannot see the
    difference, which lies in code only the evaluated pass runs."""
    error = quantity_error(activations, evaluated, "logits")
    if "logits" not in activations or error <= TOLERANCES["logits"]:
        return None
    return (
        f"its tapped forward pass and its evaluated one disagree on the logits "
        f"(error {error:.1e}): the difference is in code only the evaluated pass "
        "runs (a compiled graph), which the layer-by-layer walk cannot see"
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
    ) -> None:
        """``repeat``: evaluate every case twice in each path's process and
        report whether the bits were identical."""
        self._tmp = tempfile.TemporaryDirectory(prefix="equivalence-")
        self.work = Path(self._tmp.name)
        self.cache_dir = cache_dir or self.work
        self.timeout = timeout
        self.repeat = repeat
        self.workers = {p: Worker(p, deterministic=True) for p in paths}
        # The float64 reference and the float32 baseline it is set against
        # (``equivalence.reference``): two more workers, never given a fault.
        self.references = {
            REFERENCE: Worker(REFERENCE_PATH, env=REFERENCE_ENV, deterministic=True),
            CROSS_CHECK: Worker(
                CROSS_CHECK_PATH, env=REFERENCE_ENV, deterministic=True
            ),
            BASELINE: Worker(REFERENCE_PATH, env=BASELINE_ENV, deterministic=True),
        }

    def __enter__(self) -> Checker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for w in [*self.workers.values(), *self.references.values()]:
            w.close()
        self._tmp.cleanup()

    def _call(
        self, path: str, request: Evaluate | Activations | Trajectory
    ) -> tuple[Reply, dict[str, np.ndarray] | None]:
        """One request to ``path``'s worker, its reply and the arrays it wrote
        (into a file of this checker's, whatever ``out`` the request names)."""
        out = self.work / f"{path}-{request.TASK}.npz"
        worker = self.workers[path] if path in self.workers else self.references[path]
        reply = worker.call(dataclasses.replace(request, out=str(out)), self.timeout)
        written = isinstance(reply.answer, ArraysAnswer) and out.exists()
        return reply, load_npz(out) if written else None

    def _run_all(
        self,
        report: ModelReport,
        request: Evaluate | Trajectory,
        faults: dict[str, str],
    ) -> Results:
        results = {}
        for path in self.workers:
            if path in report.outcomes and not report.outcomes[path].ok:
                continue  # failed an earlier task already
            reply, arrays = self._call(
                path, dataclasses.replace(request, fault=faults.get(path))
            )
            report.outcomes[path] = reply
            if arrays is not None:
                results[path] = arrays
        return results

    def _reference(
        self, report: ModelReport, request: Evaluate | Trajectory | Activations
    ) -> Results:
        """The float64 reference's, the float64 cross-check's and the float32
        baseline's arrays for ``request``; when one fails, or the two float64
        runs disagree (``equivalence.reference.cross_check``),
        ``report.reference_error`` says why and nothing is returned."""
        arrays = {}
        for name in self.references:
            reply, result = self._call(name, request)
            if result is None:
                report.reference_error = f"the {name} run failed: {reply.error}"
                return {}
            arrays[name] = result
        converted = per_step if isinstance(request, Trajectory) else dict
        report.reference_error = cross_check(
            converted(arrays[REFERENCE]),
            converted(arrays[CROSS_CHECK]),
            converted(arrays[BASELINE]),
        )
        return arrays if report.reference_error is None else {}

    def check(self, case: Case, faults: dict[str, str] | None = None) -> ModelReport:
        """Run ``case`` on every path (``faults`` maps a path to a deliberate
        fault, ``native.faults``, to prove the checks catch it) and on the
        float64 reference, and judge every path against it."""
        faults = faults or {}
        spec = get_spec(case.model)
        weights = weights_file(spec, case.seed, self.cache_dir)
        shape = spec.input_shape
        if case.seq_len is not None:
            shape = (case.seq_len, *spec.input_shape[1:])
        x, y = make_batches(
            spec, case.seed, case.batch_size, max(case.steps, 1), input_shape=shape
        )
        data = self.work / "batches.npz"
        save_npz(data, {"x": x * np.float32(case.input_scale), "y": y})
        report = ModelReport(case)
        evaluate = Evaluate(
            model=case.model, weights=str(weights), data=str(data), out=""
        )
        evaluated = self._run_all(report, evaluate, faults)
        if self.repeat:
            again = self._run_all(report, evaluate, faults)
            report.repeat_errors = {
                p: _repeat_error(evaluated[p], again[p]) for p in again
            }
        for a, b in itertools.combinations(evaluated, 2):
            report.pairs.append(compare(case.model, a, evaluated[a], b, evaluated[b]))
        reference = self._reference(report, evaluate)
        trajectories: Results = {}
        trajectory_reference: Results = {}
        if case.steps:
            trajectory = Trajectory(
                model=case.model, weights=str(weights), data=str(data), out=""
            )
            trajectories = self._run_all(report, trajectory, faults)
            for a, b in itertools.combinations(trajectories, 2):
                report.trajectory_pairs.append(
                    compare_trajectory(
                        case.model, a, trajectories[a], b, trajectories[b]
                    )
                )
            if reference:
                trajectory_reference = self._reference(report, trajectory)
        report.evaluated, report.trajectories = evaluated, trajectories
        if report.reference_error is None:
            self._judge(
                report, evaluated, reference, trajectories, trajectory_reference
            )
        self._verdicts(report, evaluated)
        self._localize(
            report,
            Activations(model=case.model, weights=str(weights), data=str(data), out=""),
            faults,
            (evaluated, reference),
            (trajectories, trajectory_reference),
        )
        return report

    @staticmethod
    def _judge(
        report: ModelReport,
        evaluated: Results,
        reference: Results,
        trajectories: Results,
        trajectory_reference: Results,
    ) -> None:
        model = report.case.model
        for path, arrays in evaluated.items():
            float64, float32 = reference[REFERENCE], reference[BASELINE]
            result = judge(model, path, arrays, float64, float32)
            if path in trajectories and trajectory_reference:
                result = _merged(
                    result,
                    judge(
                        model,
                        path,
                        per_step(trajectories[path]),
                        per_step(trajectory_reference[REFERENCE]),
                        per_step(trajectory_reference[BASELINE]),
                    ),
                )
            report.judgements[path] = result
            report.multiples[path] = needed_multiple(result)

    @staticmethod
    def _verdicts(report: ModelReport, evaluated: Results) -> None:
        """``pass``/``fail`` from the judgement; ``error`` for a path that
        failed to run (or to start, unless its optional framework is not
        installed here: ``unavailable``), and for every path when the
        reference failed."""
        for path, outcome in report.outcomes.items():
            judged = report.judgements.get(path)
            if missing_framework(path, outcome):
                report.verdicts[path] = "unavailable"
            elif not outcome.ok or judged is None:
                report.verdicts[path] = "error"
            else:
                report.verdicts[path] = "pass" if judged.ok else "fail"

    def _localize(
        self,
        report: ModelReport,
        request: Activations,
        faults: dict[str, str],
        evaluated: tuple[Results, Results],
        trajectories: tuple[Results, Results],
    ) -> None:
        """Localize every failing path against the float64 reference, each
        layer allowed what ``equivalence.reference`` allows, from the float32
        baseline's error at that layer."""
        failing = [p for p, v in report.verdicts.items() if v in ("fail", "error")]
        (paths, reference), (paths_trajectory, reference_trajectory) = (
            evaluated,
            trajectories,
        )
        if not failing or report.reference_error is not None:
            return
        spec = get_spec(report.case.model)
        taps: dict[str, tuple[dict[str, np.ndarray], str | None]] = {}

        def activations(path: str) -> tuple[dict[str, np.ndarray], str | None]:
            if path not in taps:
                reply, arrays = self._call(
                    path, dataclasses.replace(request, fault=faults.get(path))
                )
                answer = reply.answer
                error = answer.error if isinstance(answer, ArraysAnswer) else None
                taps[path] = (arrays or {}, error or reply.error)
            return taps[path]

        for path in failing:
            outcome = report.outcomes.get(path)
            if outcome is None or outcome.status == "unavailable":
                continue  # it never started; its failure says why
            (mine, error) = activations(path)
            theirs, base = activations(REFERENCE)[0], activations(BASELINE)[0]
            trajectory = baseline_trajectory = None
            if report.case.steps and reference_trajectory:
                trajectory = (
                    per_step(paths_trajectory.get(path, {})),
                    per_step(reference_trajectory[REFERENCE]),
                )
                baseline_trajectory = per_step(reference_trajectory[BASELINE])
            report.localizations[path] = localize(
                spec,
                path,
                REFERENCE,
                activations=(mine, theirs),
                evaluated=(paths.get(path, {}), reference[REFERENCE]),
                trajectory=trajectory,
                baseline=(base, reference[BASELINE], baseline_trajectory),
                error=error,
                contradiction=_contradiction(mine, paths.get(path, {})),
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
