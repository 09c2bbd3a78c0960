"""``python -m harness run``: time every model on every path, both phases.

First the gate (``equivalence.gate``): every path gets a cached or fresh
equivalence verdict for every model.  A path without a passing verdict is not
timed (its cells get a ``not-timed`` record saying why) unless
``allow_unverified`` is set; then it is timed and its records say
``verified: false``, which every report row shows.

Each cell (model, path, phase) is measured in a worker of its path; a cell
that fails becomes a record with its failure and the run goes on.  Records are
appended to ``<results>/run-<timestamp>.jsonl`` as soon as each cell ends.
"""

from __future__ import annotations

import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from equivalence.gate import verify
from harness import records
from harness.launch import Worker
from harness.paths import get_path
from harness.profiles import Profile, Settings
from zoo.data import batches_file
from zoo.specs import get_spec
from zoo.weights import weights_file

WEIGHTS_SEED = 0
DATA_SEED = 1


def summarize(phase: str, values: dict[str, Any]) -> dict[str, Any]:
    if phase == "train":
        return {
            "median_step_s": statistics.median(values["step_s"]),
            "first_step_s": values["first_step_s"],
        }
    return {
        "batches_per_s": values["batches_per_s"],
        "median_batch_s": statistics.median(values["round_s"])
        / values["batches_per_round"],
    }


def _request(
    settings: Settings, model: str, phase: str, weights: Path, data: Path
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "task": phase,
        "model": model,
        "weights": str(weights),
        "data": str(data),
    }
    if phase == "train":
        request |= {
            "steps": settings.train_steps,
            "repeats": settings.repeats,
            "warmup_repeats": settings.warmup_repeats,
        }
    else:
        request |= {
            "window_s": settings.window_s,
            "warmup_rounds": settings.warmup_rounds,
        }
    return request


def run(
    profile: Profile,
    *,
    models: list[str],
    paths: list[str],
    phases: list[str],
    results_dir: Path,
    allow_unverified: bool = False,
) -> Path:
    """Measure every cell; returns the records file."""
    run_id = time.strftime("%Y%m%d-%H%M%S")
    out = results_dir / f"run-{run_id}.jsonl"
    cache = results_dir / "cache"
    verdicts = verify(
        models,
        paths,
        results_dir,
        weights_seed=WEIGHTS_SEED,
        timeout=profile.timeout_s,
    )
    host = records.host_platform()
    cells = [(m, p, ph) for m in models for ph in phases for p in paths]
    print(
        f"run {run_id}: {len(cells)} cells, profile {profile.name}, records in {out}",
        file=sys.stderr,
    )
    with ExitStack() as shared:
        shared_workers: dict[str, Worker] = {}
        for i, (model, path_id, phase) in enumerate(cells, start=1):
            spec = get_spec(model)
            path = get_path(path_id)
            settings = profile.settings(model)
            batch = settings.batch_size or spec.workload.batch_size
            count = settings.train_steps if phase == "train" else settings.infer_batches
            weights = weights_file(spec, WEIGHTS_SEED, cache)
            data = batches_file(spec, DATA_SEED, batch, count, cache)
            request = _request(settings, model, phase, weights, data)
            label = f"[{i}/{len(cells)}] {model} {path_id} {phase}"
            verdict = verdicts[model][path_id]
            verified = verdict == "pass"
            # A path whose worker could not start is tried anyway: its own
            # record then says why it is unavailable.
            if not (verified or allow_unverified or verdict == "unavailable"):
                record = records.Record(
                    run_id=run_id,
                    profile=profile.name,
                    model=model,
                    path=path_id,
                    framework=path.framework,
                    api=path.api,
                    phase=phase,
                    status="not-timed",
                    batch_size=batch,
                    equivalence=verdict,
                    verified=False,
                    platform=host,
                    error=(
                        f"equivalence verdict {verdict!r}: not timed; pass "
                        "--allow-unverified to time it anyway"
                    ),
                )
                records.append(out, record)
                print(f"{label}: {_describe(record)}", file=sys.stderr, flush=True)
                continue
            print(f"{label} ...", file=sys.stderr, flush=True)
            start = time.perf_counter()
            if profile.fresh_worker_per_cell:
                with Worker(path_id) as worker:
                    response = worker.call(request, profile.timeout_s)
                    worker_platform = worker.platform
            else:
                if path_id not in shared_workers:
                    shared_workers[path_id] = shared.enter_context(Worker(path_id))
                worker = shared_workers[path_id]
                response = worker.call(request, profile.timeout_s)
                worker_platform = worker.platform
            ok = response["status"] == "ok"
            values = response.get("result", {}) if ok else {}
            summary = summarize(phase, values) if ok else {}
            record = records.Record(
                run_id=run_id,
                profile=profile.name,
                model=model,
                path=path_id,
                framework=path.framework,
                api=path.api,
                phase=phase,
                status=response["status"],
                batch_size=batch,
                equivalence=verdict,
                verified=verified,
                values=values,
                summary=summary,
                settings={
                    k: v
                    for k, v in request.items()
                    if k not in ("weights", "data", "task")
                },
                platform={**host, **worker_platform},
                error=None if ok else response.get("error"),
            )
            records.append(out, record)
            took = time.perf_counter() - start
            print(
                f"{label}: {_describe(record)} ({took:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
    return out


def _describe(record: records.Record) -> str:
    if record.status != "ok":
        return f"{record.status.upper()}: {record.error}"
    mark = "" if record.verified else " (UNVERIFIED)"
    return _describe_times(record) + mark


def _describe_times(record: records.Record) -> str:
    s = record.summary
    if record.phase == "train":
        return (
            f"{s['median_step_s'] * 1e3:.2f} ms/step, "
            f"first step {s['first_step_s']:.2f} s"
        )
    return f"{s['batches_per_s']:.1f} batches/s"
