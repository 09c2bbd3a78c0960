"""Run every path on the same canonical weights and batches, then compare all pairs.

A case is one forward and backward pass on the first mini-batch and, when
``steps`` is set, a training trajectory of that many optimizer steps on the
same mini-batches.  A path that disagrees with the majority (or fails) is then
localized against an agreeing path: the first layer where the two part ways
(``equivalence.localize``).  ``accuracy`` trains on real digits and compares
the test accuracy every path reaches.

Framework-free: the paths run in workers (``workers.launch``), one process per
path kept open across models and cases, so Hypothesis can draw many cases
without paying each framework's import again.  Workers run with fast-math
modes off and deterministic algorithms on (``workers.numerics``).
"""

from __future__ import annotations

import dataclasses
import itertools
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from equivalence.compare import (
    PairResult,
    compare,
    compare_trajectory,
    path_verdicts,
)
from equivalence.localize import Localization, localize
from workers.launch import Reply, Worker
from workers.messages import (
    Accuracy,
    AccuracyAnswer,
    Activations,
    ArraysAnswer,
    Evaluate,
    Trajectory,
)
from zoo.arrays import load_npz, save_npz
from zoo.data import make_batches
from zoo.digits import digit_epochs
from zoo.specs import get_spec
from zoo.weights import weights_file


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


@dataclass
class ModelReport:
    case: Case
    outcomes: dict[str, Reply] = field(default_factory=dict)
    pairs: list[PairResult] = field(default_factory=list)
    trajectory_pairs: list[PairResult] = field(default_factory=list)
    verdicts: dict[str, str] = field(default_factory=dict)
    localizations: dict[str, Localization] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No pair disagrees and no path failed to produce its arrays."""
        errored = any(
            o.status not in ("ok", "unavailable") for o in self.outcomes.values()
        )
        pairs = [*self.pairs, *self.trajectory_pairs]
        return not errored and all(p.ok for p in pairs)


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


def _merged(pairs: list[PairResult], more: list[PairResult]) -> list[PairResult]:
    by_pair = {(p.a, p.b): p for p in more}
    return [
        PairResult(p.model, p.a, p.b, p.entries + by_pair[(p.a, p.b)].entries)
        if (p.a, p.b) in by_pair
        else p
        for p in pairs
    ]


class Checker:
    """Workers for ``paths``, kept open; ``check(case)`` runs and compares them."""

    def __init__(
        self, paths: list[str], cache_dir: Path | None = None, timeout: float = 900.0
    ) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="equivalence-")
        self.work = Path(self._tmp.name)
        self.cache_dir = cache_dir or self.work
        self.timeout = timeout
        self.workers = {p: Worker(p, deterministic=True) for p in paths}

    def __enter__(self) -> Checker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for w in self.workers.values():
            w.close()
        self._tmp.cleanup()

    def _call(
        self, path: str, request: Evaluate | Activations | Trajectory
    ) -> tuple[Reply, dict[str, np.ndarray] | None]:
        """One request to ``path``'s worker, its reply and the arrays it wrote
        (into a file of this checker's, whatever ``out`` the request names)."""
        out = self.work / f"{path}-{request.TASK}.npz"
        reply = self.workers[path].call(
            dataclasses.replace(request, out=str(out)), self.timeout
        )
        written = isinstance(reply.answer, ArraysAnswer) and out.exists()
        return reply, load_npz(out) if written else None

    def _run_all(
        self,
        report: ModelReport,
        request: Evaluate | Trajectory,
        faults: dict[str, str],
    ) -> dict[str, dict[str, np.ndarray]]:
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

    def check(self, case: Case, faults: dict[str, str] | None = None) -> ModelReport:
        """Run ``case`` on every path (``faults`` maps a path to a deliberate
        fault, ``native.faults``, to prove the checks catch it)."""
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
        evaluate = Evaluate(
            model=case.model, weights=str(weights), data=str(data), out=""
        )
        report = ModelReport(case)
        evaluated = self._run_all(report, evaluate, faults)
        for a, b in itertools.combinations(evaluated, 2):
            report.pairs.append(compare(case.model, a, evaluated[a], b, evaluated[b]))
        trajectories: dict[str, dict[str, np.ndarray]] = {}
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
        ran = [p for p in self.workers if p in evaluated]
        report.verdicts = path_verdicts(
            ran, _merged(report.pairs, report.trajectory_pairs)
        )
        for path, outcome in report.outcomes.items():
            if outcome.status == "unavailable":
                report.verdicts[path] = "unavailable"
            elif not outcome.ok:
                report.verdicts[path] = "error"
        activations = Activations(
            model=case.model, weights=str(weights), data=str(data), out=""
        )
        self._localize(report, activations, faults, evaluated, trajectories)
        return report

    def _localize(
        self,
        report: ModelReport,
        request: Activations,
        faults: dict[str, str],
        evaluated: dict[str, dict[str, np.ndarray]],
        trajectories: dict[str, dict[str, np.ndarray]],
    ) -> None:
        """Localize every failing path against the first passing one (or, with
        no passing path, against the first other path that produced arrays)."""
        failing = [p for p, v in report.verdicts.items() if v in ("fail", "error")]
        if not failing:
            return
        passing = [p for p, v in report.verdicts.items() if v == "pass"]
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
            candidates = passing or [p for p in evaluated if p != path]
            if not candidates:
                continue
            reference = candidates[0]
            (mine, error), (theirs, _) = activations(path), activations(reference)
            trajectory = None
            if report.case.steps:
                trajectory = (
                    trajectories.get(path, {}),
                    trajectories.get(reference, {}),
                )
            report.localizations[path] = localize(
                spec,
                path,
                reference,
                activations=(mine, theirs),
                evaluated=(evaluated.get(path, {}), evaluated[reference]),
                trajectory=trajectory,
                error=error,
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
