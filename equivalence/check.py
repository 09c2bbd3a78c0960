"""Run every path on the same canonical weights and batch, then compare all pairs.

Framework-free: the paths run in workers (``harness.launch``), one process per
path kept open across models and cases, so Hypothesis can draw many cases
without paying each framework's import again.
"""

from __future__ import annotations

import itertools
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from equivalence.compare import PairResult, compare, path_verdicts
from harness.launch import Worker
from zoo.arrays import load_npz, save_npz
from zoo.data import make_batches
from zoo.specs import get_spec
from zoo.weights import weights_file


@dataclass(frozen=True)
class Case:
    """One equivalence case: a model, a seed for weights and data, a batch size
    and, for sequence models, a sequence length (``None``: the spec's)."""

    model: str
    seed: int = 0
    batch_size: int = 8
    seq_len: int | None = None

    def describe(self) -> str:
        text = f"model={self.model!r}, seed={self.seed}, batch_size={self.batch_size}"
        return text + (f", seq_len={self.seq_len}" if self.seq_len else "")


@dataclass
class ModelReport:
    case: Case
    outcomes: dict[str, dict[str, Any]] = field(default_factory=dict)
    pairs: list[PairResult] = field(default_factory=list)
    verdicts: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No pair disagrees and no path failed to produce its arrays."""
        errored = any(
            o["status"] not in ("ok", "unavailable") for o in self.outcomes.values()
        )
        return not errored and all(p.ok for p in self.pairs)


class Checker:
    """Workers for ``paths``, kept open; ``check(case)`` runs and compares them."""

    def __init__(
        self, paths: list[str], cache_dir: Path | None = None, timeout: float = 900.0
    ) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="equivalence-")
        self.cache_dir = cache_dir or Path(self._tmp.name)
        self.timeout = timeout
        self.workers = {p: Worker(p) for p in paths}

    def __enter__(self) -> Checker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for w in self.workers.values():
            w.close()
        self._tmp.cleanup()

    def check(self, case: Case, faults: dict[str, str] | None = None) -> ModelReport:
        """Run ``case`` on every path (``faults`` maps a path to a layout fault
        injected into its weights, to prove the checks catch it)."""
        spec = get_spec(case.model)
        weights = weights_file(spec, case.seed, self.cache_dir)
        shape = spec.input_shape
        if case.seq_len is not None:
            shape = (case.seq_len, *spec.input_shape[1:])
        x, y = make_batches(spec, case.seed, case.batch_size, 1, input_shape=shape)
        work = Path(self._tmp.name)
        data = work / "batch.npz"
        save_npz(data, {"x": x, "y": y})
        report = ModelReport(case)
        arrays: dict[str, dict[str, np.ndarray]] = {}
        for path, worker in self.workers.items():
            out = work / f"{path}.npz"
            request = {
                "task": "evaluate",
                "model": case.model,
                "weights": str(weights),
                "data": str(data),
                "out": str(out),
                "fault": (faults or {}).get(path),
            }
            outcome = worker.call(request, self.timeout)
            report.outcomes[path] = outcome
            if outcome["status"] == "ok":
                arrays[path] = load_npz(out)
        for a, b in itertools.combinations(arrays, 2):
            report.pairs.append(compare(case.model, a, arrays[a], b, arrays[b]))
        report.verdicts = path_verdicts(list(arrays), report.pairs)
        for path, outcome in report.outcomes.items():
            if outcome["status"] == "unavailable":
                report.verdicts[path] = "unavailable"
            elif outcome["status"] != "ok":
                report.verdicts[path] = "error"
        return report
