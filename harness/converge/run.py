"""A converge run: the data, the gate, every path, then the ensemble.

Records go to ``<results>/converge/converge-<time>-<pid>.jsonl``
(``jsonl.claim``: two runs never share one), one line per training run as
it ends (``harness.core.jsonl``), so a crash loses at most the run under
way.  Each names the model, the path, its role (``path``, or
``ensemble`` with its ``nudge``: 0 for the weights as they are), the
ensemble's implementations (``ensemble_paths``), the gate's
verdict, the data it trained on, the per-epoch training seconds, test
accuracy and losses, and the worker's platform and this machine.
Framework-free.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.core import gate, jsonl, machines
from harness.core.placement import Placement, kept_off, of_profile
from harness.core.profiles import ConvergeModel, Profile
from harness.core.progress import Progress
from workers.launch import Worker
from workers.messages import Converge, ConvergeAnswer, encode
from zoo import datasets
from zoo.arrays import digest, load_npz, save_npz
from zoo.models import get_spec

SCHEMA = 1
FOLDER = "converge"


@dataclass(frozen=True)
class Prepared:
    """One model's data, written for the workers, and its budget."""

    model: str
    file: Path
    batches: int  # mini-batches per epoch
    batch_size: int
    train_samples: int
    test_samples: int
    source: str
    budget: ConvergeModel
    learning_rate: float

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "batches_per_epoch": self.batches,
            "batch_size": self.batch_size,
            "learning_rate": self.learning_rate,
            "train_samples": self.train_samples,
            "test_samples": self.test_samples,
            "target": self.budget.target,
        }


def prepare(
    profile: Profile, model: str, data_dir: Path | None, glove: Path | None, cache: Path
) -> Prepared:
    """Load ``model``'s dataset, cut it as the profile says, and write the
    workers' file: one epoch of mini-batches (one seeded shuffle, the same
    order every epoch: the timed closure trains over resident batches) and
    the test split in batches of the same size."""
    spec = get_spec(model)
    budget = profile.converge.of(model)
    options = datasets.Options(
        train_samples=budget.train_samples,
        test_samples=budget.test_samples,
        sequence_length=budget.sequence_length,
        vocabulary=budget.vocabulary,
        glove=glove,
        seed=profile.seed,
    )
    split = datasets.load(spec, data_dir, options)
    batch = budget.batch_size or spec.workload.batch_size
    x, y = datasets.batched(split.train_x, split.train_y, batch)
    arrays = {
        "x": x,
        "y": y,
        "test_x": datasets.padded(split.test_x, batch),
        "test_y": split.test_y.astype(np.int32),
    }
    file = cache / f"converge-{model}-{digest(arrays)[:16]}.npz"
    if not file.exists():
        save_npz(file, arrays)
    return Prepared(
        model,
        file,
        len(x),
        batch,
        len(x) * batch,
        len(split.test_y),
        split.source,
        budget,
        budget.learning_rate or spec.workload.learning_rate,
    )


def nudged(
    weights: dict[str, np.ndarray], seed: int, ulps: int = 1
) -> dict[str, np.ndarray]:
    """Every weight moved by ``ulps`` float32 ulps (steps to the next
    float32, one at a time), up or down by a seeded coin."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in sorted(weights):
        w = np.asarray(weights[name], np.float32)
        up = rng.integers(0, 2, size=w.shape).astype(bool)
        toward = np.where(up, np.float32(np.inf), np.float32(-np.inf))
        for _ in range(ulps):
            w = np.nextafter(w, toward.astype(np.float32))
        out[name] = w
    return out


@dataclass
class Plan:
    """What one run trains: per model, the paths (with their verdicts) and
    the ensemble's nudges."""

    profile: Profile
    prepared: dict[str, Prepared]
    verdicts: dict[str, dict[str, str]]
    paths: list[str]
    allow_unverified: bool

    def trained(self, model: str) -> list[str]:
        return [
            p
            for p in self.paths
            if self.verdicts[model].get(p) == "pass" or self.allow_unverified
        ]

    def ensemble(self, model: str) -> list[tuple[str, int]]:
        """The ensemble's runs, ``(path, nudge)``: of each of its paths that
        passed the gate, the plain run (nudge 0) unless the path trains
        anyway, then its nudged ones."""
        runs = []
        for path in self.profile.converge.ensemble_paths:
            if self.verdicts[model].get(path) != "pass":
                continue
            plain = [] if path in self.trained(model) else [0]
            nudges = plain + list(range(1, self.profile.converge.ensemble + 1))
            runs += [(path, n) for n in nudges]
        return runs


def run_converge(
    profile: Profile,
    results: Path,
    *,
    models: list[str],
    paths: list[str],
    data_dir: Path | None,
    glove: Path | None = None,
    allow_unverified: bool = False,
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> Path:
    """Train every model on every path that passes the gate, then its
    ensemble; the records file written."""
    cache = results / "cache"
    prepared = {m: prepare(profile, m, data_dir, glove, cache) for m in models}
    for p in prepared.values():
        log(
            f"converge {p.model}: {p.source}; {p.train_samples} training samples "
            f"({p.batches} mini-batches of {p.batch_size}), {p.test_samples} test"
        )
    ensemble_paths = list(profile.converge.ensemble_paths)
    gated = [*paths, *(p for p in ensemble_paths if p not in paths)]
    verdicts = gate.verify(models, gated, results, weights_seed=0, log=log)
    plan = Plan(profile, prepared, verdicts, paths, allow_unverified)
    out = jsonl.claim(results / FOLDER, "converge", ".jsonl")
    machine = machines.identity()
    progress = Progress(
        sum(len(plan.trained(m)) + len(plan.ensemble(m)) for m in models)
    )
    placement = of_profile(profile)
    for model in models:
        base = {
            "schema": SCHEMA,
            "model": model,
            "ensemble_paths": ensemble_paths,
            "nudge_ulps": profile.converge.nudge_ulps,
            **prepared[model].describe(),
        }
        planned = [(p, 0, "path") for p in paths] + [
            (p, n, "ensemble") for p, n in plan.ensemble(model)
        ]
        for path, nudge, role in planned:
            verdict = verdicts[model][path]
            if role == "path" and path not in plan.trained(model):
                record = {
                    "path": path,
                    "role": role,
                    "nudge": 0,
                    "status": "not-trained",
                }
                log(f"converge {model}: {path} not trained (gate: {verdict})")
            else:
                with kept_off(placement):
                    record = train(profile, prepared[model], path, nudge, placement)
                record["role"] = role
                progress.advance()
                log(f"{progress.line()} converge {model}: {summary(record)}")
            record.update(base, verdict=verdict, machine=machine)
            jsonl.append(out, record, noun="record")
    return out


def train(
    profile: Profile,
    prepared: Prepared,
    path: str,
    nudge: int,
    placement: Placement,
) -> dict[str, Any]:
    """One training run of ``path`` (from weights nudged by ``nudge``, 0:
    none) in a fresh worker; its record."""
    spec = get_spec(prepared.model)
    cache = prepared.file.parent
    weights, weights_sha = gate.checked_weights(spec, 0, cache)
    if nudge:
        ulps = profile.converge.nudge_ulps
        moved = nudged(load_npz(weights), nudge, ulps)
        weights = cache / f"weights-{spec.name}-nudge{nudge}-{ulps}ulp.npz"
        save_npz(weights, moved)
        weights_sha = digest(moved)
    budget = prepared.budget
    request = Converge(
        model=spec.name,
        weights=str(weights),
        weights_digest=weights_sha,
        data=str(prepared.file),
        epochs=budget.epochs,
        stop_at=budget.target if profile.converge.stop_at_target else None,
        learning_rate=budget.learning_rate,
    )
    record: dict[str, Any] = {"path": path, "nudge": nudge}
    start = time.monotonic()
    with Worker(path, env=placement.env, cpus=placement.worker_cpus) as worker:
        reply = worker.call(request, profile.timeout_s)
        record["platform"] = worker.platform
    record["wall_s"] = round(time.monotonic() - start, 3)
    if isinstance(reply.answer, ConvergeAnswer):
        record.update(encode(reply.answer), status="ok")
        if reply.answer.nonfinite is not None:
            record.update(status="nonfinite", error=reply.answer.nonfinite)
    else:
        record.update(status=reply.status, error=reply.error)
    return record


def summary(record: dict[str, Any]) -> str:
    """One progress line: the path, and its final accuracy or its error."""
    who = record["path"] + (f" (nudge {record['nudge']})" if record["nudge"] else "")
    if record.get("status") != "ok":
        return f"{who} {record.get('status')}: {record.get('error')}"
    accuracy = record["accuracy"]
    return (
        f"{who}: accuracy {accuracy[-1]:.4f} after {len(accuracy)} epochs, "
        f"{sum(record['train_s']):.1f} s training"
    )
