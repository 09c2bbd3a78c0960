"""``python -m harness floors``: is each native path a credible baseline?

A native path is a fair yardstick for the Keras overhead only if it is about
as fast as its framework allows.  For every framework and model this times,
in one worker of the native path, the native training step and the
framework's idiomatic fast step (``native/<framework>/idiomatic.py``:
``nn.Module`` with ``torch.optim``; the jitted step with Optax; the step
compiled by XLA), and reports native / idiomatic.  Above ``SLOWER`` the
native path is flagged.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

from tabulate import tabulate

from harness.core import jsonl, records
from harness.core.profiles import Profile
from harness.core.seeds import DATA_SEED, WEIGHTS_SEED
from harness.report.summary import SLOWER
from native import IDIOMATIC
from workers.launch import Worker
from workers.messages import Floor, FloorAnswer, encode
from zoo.data import batches_file
from zoo.models import get_spec
from zoo.weights import weights_file

VARIANTS = ("path", "idiomatic")  # the fields of workers.messages.FloorAnswer
# Timed runs of each variant in its one process (not repeats: those are fresh
# processes, and floors compares two steps inside one).
RUNS = 5


def native_frameworks() -> list[str]:
    """The frameworks that have an idiomatic step to compare against."""
    return list(IDIOMATIC)


def floors(
    profile: Profile,
    *,
    models: list[str],
    frameworks: list[str],
    results_dir: Path,
    runs: int = RUNS,
) -> tuple[Path, list[dict[str, Any]]]:
    """Measure both variants per (framework, model), ``runs`` timed runs of
    the profile's ``train_steps`` each, interleaved in one worker process;
    the records file and rows.  Raises ValueError when the profile leaves a
    training setting unset."""
    profile.require(["train"], models)
    out = jsonl.claim(results_dir, "floors", ".jsonl")
    run_id = out.stem.removeprefix("floors-")
    cache = results_dir / "cache"
    host = records.host_platform()
    rows = []
    for framework in frameworks:
        path_id = f"native-{framework}"
        with Worker(path_id) as worker:
            for model in models:
                spec = get_spec(model)
                settings = profile.settings(model)
                steps = settings.training().train_steps
                batch = settings.batch_size or spec.workload.batch_size
                request = Floor(
                    model=model,
                    weights=str(weights_file(spec, WEIGHTS_SEED, cache)),
                    data=str(batches_file(spec, DATA_SEED, batch, steps, cache)),
                    steps=steps,
                    runs=runs,
                )
                print(f"{framework} {model} ...", file=sys.stderr, flush=True)
                reply = worker.call(request, profile.timeout_s)
                answer = reply.answer
                medians: dict[str, float | None] = {}
                for variant in VARIANTS:
                    timed = (
                        getattr(answer, variant)
                        if isinstance(answer, FloorAnswer)
                        else None
                    )
                    medians[variant] = (
                        statistics.median(timed.step_s) if timed else None
                    )
                    records.append(
                        out,
                        records.make(
                            run_id,
                            profile.name,
                            model=model,
                            path=path_id
                            if variant == "path"
                            else f"idiomatic-{framework}",
                            framework=framework,
                            api=variant,
                            phase="train",
                            status=reply.status,
                            batch_size=batch,
                            equivalence="not checked",
                            values=encode(timed) if timed else {},
                            summary={"median_step_s": medians[variant]}
                            if timed
                            else {},
                            settings={"steps": request.steps, "runs": runs},
                            host=host,
                            platform=worker.platform,
                            error=reply.error,
                        ),
                    )
                rows.append(_row(framework, model, medians, reply.error))
                print(rows[-1], file=sys.stderr, flush=True)
    return out, rows


def _row(
    framework: str,
    model: str,
    medians: dict[str, float | None],
    error: str | None,
) -> dict[str, Any]:
    native, idiomatic = medians["path"], medians["idiomatic"]
    ratio = native / idiomatic if native and idiomatic else None
    return {
        "framework": framework,
        "model": model,
        "native_ms": None if native is None else round(native * 1e3, 3),
        "idiomatic_ms": None if idiomatic is None else round(idiomatic * 1e3, 3),
        "native/idiomatic": None if ratio is None else round(ratio, 3),
        "flag": error or ("slower" if ratio is not None and ratio > SLOWER else ""),
    }


def render(rows: list[dict[str, Any]]) -> str:
    table: str = tabulate(rows, headers="keys", missingval="—", floatfmt="g")
    return table
