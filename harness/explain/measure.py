"""``python -m harness explain``: where Keras' cost goes, measured.

For every model, framework (JAX, TensorFlow, PyTorch; MXNet, which Keras
does not run on, has its native paths swept and profiled only) and phase,
one worker process per repeat serves the four levels of
``workers.paths.levels_of`` at once (Keras ``fit`` on NumPy, on
``resident`` tensors, Keras' own ``step`` in a plain loop, the ``native``
path) and times their blocks interleaved (``workers.messages.Levels``) at
every batch size of the sweep; one more process profiles every level once at
the cell's own batch size (``workers.messages.Profile``).  Every level is a
path the gate checks first, timed closures included; a cell whose levels do
not all pass is not measured (``--allow-unverified`` measures it anyway and
says so).

Everything measured is appended to ``<results>/explain-<run id>/
explain.jsonl`` as it arrives, so an interrupted run loses nothing; the
analysis (``harness.explain.decompose``) then writes ``explain.json``,
``explain.md`` and one stacked-bar plot per model and framework
(``harness.report.plots.explain_bars``).  ``python -m harness report`` shows the
latest explain run's tables too.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core import jsonl, records, validated
from harness.core.gate import checked_batches, checked_weights, verify
from harness.core.placement import Placement, kept_off, of_profile
from harness.core.profiles import Profile
from harness.core.progress import Progress
from harness.core.resources import resource_summary
from harness.core.seeds import WEIGHTS_SEED
from harness.explain import decompose
from harness.report import explain_runs as analysis
from workers.frameworks import FRAMEWORKS as REGISTERED
from workers.launch import Worker
from workers.messages import Levels, LevelsAnswer, ProfileAnswer, encode
from workers.messages import Profile as ProfileRequest
from workers.paths import levels_of
from zoo import files
from zoo.models import get_spec

# Keras runs on the first three; MXNet's native paths are only profiled.
FRAMEWORKS = tuple(REGISTERED)
PROCESSES = 3  # worker processes per cell, each timing every batch size
PROFILE_ROUNDS = 3  # profiled blocks of every level, in alternation
Log = Callable[[str], None]


def sweep_sizes(batch: int) -> list[int]:
    """The default sweep: the cell's batch size and three smaller by
    factors of four (64 -> 1, 4, 16, 64)."""
    return sorted({max(1, batch // 4**k) for k in range(4)})


def explain(
    profile: Profile,
    *,
    models: list[str],
    frameworks: list[str],
    phases: list[str],
    results_dir: Path,
    batch_sizes: list[int] | None = None,
    processes: int = PROCESSES,
    allow_unverified: bool = False,
    log: Log = lambda line: print(line, file=sys.stderr),
) -> Path:
    """Measure every cell, then write the analysis; the run's folder.

    Raises ValueError when the profile leaves a setting of ``phases`` unset."""
    profile.require(phases, models)
    out = jsonl.claim(results_dir, "explain")
    raw = out / "explain.jsonl"
    where = of_profile(profile)
    cache = results_dir / "cache"

    def write(line: dict[str, Any]) -> None:
        jsonl.append(raw, line)

    host = {
        **records.host_platform(),
        "threads": where.record(),
        "train_steps": {m: profile.settings(m).train_steps for m in models},
    }
    write({"kind": "host", "host": host, "profile": profile.name})
    for model in models:
        paths = [p for f in frameworks for p in levels_of(f)]
        verdicts = verify(
            [model], paths, results_dir, weights_seed=WEIGHTS_SEED, log=log
        )[model]
        for framework in frameworks:
            levels = levels_of(framework)
            failing = [f"{p} {verdicts[p]}" for p in levels if verdicts[p] != "pass"]
            # An infer-only level (its training alone disagrees with float64)
            # is explained for inference.
            measured = [
                phase
                for phase in phases
                if all(records.verified(verdicts[p], phase) for p in levels)
            ]
            if all(verdicts[p] == "unavailable" for p in levels):
                failing = [f"{framework} is not installed here"]
            elif failing and measured and not allow_unverified:
                left = ", ".join(ph for ph in phases if ph not in measured)
                log(
                    f"explain {model} {framework}: {left} not measured: "
                    f"{', '.join(failing)} in the equivalence gate"
                )
                failing = []
            else:
                measured = list(phases)
            if failing and not allow_unverified:
                why = f"not measured: {', '.join(failing)} in the equivalence gate"
                log(f"explain {model} {framework}: {why}")
                write(
                    {
                        "kind": "skipped",
                        "model": model,
                        "framework": framework,
                        "why": why,
                    }
                )
                continue
            cell = _Cell(
                profile,
                model=model,
                framework=framework,
                levels=levels,
                cache=cache,
                where=where,
                write=write,
                log=log,
            )
            cell.unverified = bool(failing)
            with kept_off(where):
                cell.measure(measured, batch_sizes, processes)
                cell.profile_levels(measured)
    render(out)
    return out


class _Cell:
    """One model and framework: its levels' workers and requests."""

    def __init__(
        self,
        profile: Profile,
        *,
        model: str,
        framework: str,
        levels: list[str],
        cache: Path,
        where: Placement,
        write: Callable[[dict[str, Any]], None],
        log: Log,
    ) -> None:
        self.profile, self.model, self.framework = profile, model, framework
        self.levels, self.cache, self.where = levels, cache, where
        self.write, self.log = write, log
        self.spec = get_spec(model)
        self.settings = profile.settings(model)
        self.batch = self.settings.batch_size or self.spec.workload.batch_size
        self.weights = checked_weights(self.spec, WEIGHTS_SEED, cache)
        self.unverified = False

    def _files(self, phase: str, batch: int) -> dict[str, Any]:
        count = self.settings.batches(phase)
        data = checked_batches(self.spec, self.profile.seed, batch, count, self.cache)
        return {
            "model": self.model,
            "weights": str(self.weights[0]),
            "weights_digest": self.weights[1],
            "data": str(data[0]),
            "data_digest": data[1],
        }

    def _steps(self, phase: str) -> int:
        return self.settings.training().train_steps if phase == "train" else 1

    def _line(self, kind: str, phase: str, batch: int, **more: Any) -> dict[str, Any]:
        return {
            "kind": kind,
            "model": self.model,
            "framework": self.framework,
            "phase": phase,
            "batch": batch,
            "main_batch": self.batch,
            "unverified": self.unverified,
            **more,
        }

    def _worker(self) -> Worker:
        """A fresh process serving every level (the caller closes it)."""
        return Worker(
            self.levels[0],
            env=self.where.env,
            partner=self.levels[1:],
            cpus=self.where.worker_cpus,
        )

    def _started(self, worker: Worker, phase: str) -> bool:
        if worker.failure is None:
            return True
        why = worker.failure.error or worker.failure.status
        self.log(f"explain {self.model} {self.framework}: no worker: {why}")
        self.write(self._line("failure", phase, self.batch, task="start", why=str(why)))
        return False

    def measure(
        self, phases: list[str], batch_sizes: list[int] | None, processes: int
    ) -> None:
        """Every batch size of the sweep and phase in ``processes`` fresh
        worker processes, all levels interleaved."""
        sizes = sorted(set(batch_sizes or sweep_sizes(self.batch)) | {self.batch})
        progress = Progress(processes * len(phases) * len(sizes))
        for repeat in range(processes):
            with self._worker() as worker:
                if not self._started(worker, phases[0]):
                    continue
                for phase in phases:
                    # Batch sizes in a rotated order per process, so no size
                    # always runs first (or last) in its process.
                    shift = repeat % len(sizes)
                    for batch in sizes[shift:] + sizes[:shift]:
                        seed = zlib.crc32(
                            f"{self.model} {phase} {batch} {repeat}".encode()
                        )
                        request = Levels(
                            **self._files(phase, batch),
                            phase=phase,
                            steps=self._steps(phase),
                            window_s=self.settings.pair_window_s,
                            min_blocks=self.settings.pair_min_blocks,
                            warmup_runs=max(self.settings.warmup_runs, 1),
                            seed=seed,
                        )
                        self._call(worker, request, phase, batch, repeat=repeat)
                        progress.advance()
                        self._progress(
                            progress, f"{phase} b{batch} process {repeat + 1}"
                        )

    def profile_levels(self, phases: list[str]) -> None:
        """Every level profiled at the cell's batch size, in alternation, in
        one more process."""
        progress = Progress(len(phases))
        with self._worker() as worker:
            started = self._started(worker, phases[0])
            for phase in phases if started else []:
                profiled = ProfileRequest(
                    **self._files(phase, self.batch),
                    targets=self.levels,
                    phase=phase,
                    steps=self._steps(phase),
                    rounds=PROFILE_ROUNDS,
                    seed=zlib.crc32(f"{self.model} {phase} profile".encode()),
                )
                self._call(worker, profiled, phase, self.batch)
                progress.advance()
                self._progress(progress, f"{phase} profiled")

    def _call(
        self,
        worker: Worker,
        request: Levels | ProfileRequest,
        phase: str,
        batch: int,
        **more: Any,
    ) -> None:
        reply = worker.call(request, self.profile.timeout_s)
        kind = request.TASK
        answer = reply.answer
        # A level that left NaN or inf behind diverged: its times are no
        # timing of the checked computation, so they are not analysed.
        bad = [n for n in getattr(answer, "nonfinite", []) if n]
        if isinstance(answer, LevelsAnswer | ProfileAnswer) and not bad:
            more["resources"] = resource_summary(reply.resources)
            self.write(self._line(kind, phase, batch, answer=encode(answer), **more))
            return
        why = f"diverged: {bad[0]}" if bad else (reply.error or reply.status)
        self.log(
            f"explain {self.model} {self.framework} {phase} b{batch} {kind}: {why}"
        )
        self.write(self._line("failure", phase, batch, task=kind, why=str(why), **more))

    def _progress(self, progress: Progress, what: str) -> None:
        self.log(f"{progress.line()} explain {self.model} {self.framework} {what}")


def read(out: Path) -> list[dict[str, Any]]:
    """The JSON lines of an explain run, by the policy of
    :mod:`harness.core.jsonl` (the torn last line of a crash skipped with a
    warning on stderr)."""
    return jsonl.objects(out / "explain.jsonl")


def render(out: Path) -> list[dict[str, Any]]:
    """Analyse an explain run's lines; write ``explain.json``, ``explain.md``
    and the plots into ``out``; the cells."""
    from harness.report.plots import explain_bars

    lines = read(out)
    found = decompose.cells(lines)
    skipped = [line for line in lines if line["kind"] in ("skipped", "failure")]
    files.write_json(
        out / "explain.json",
        {"schema": 1, "cells": found, "not_measured": skipped},
        indent=1,
    )
    files.write_text(out / "explain.md", markdown(found, skipped))
    explain_bars([c for c in found if "parts" in c], out)
    return found


def latest(results_dir: Path) -> Path | None:
    """The newest explain run under ``results_dir`` that has an analysis."""
    runs = sorted(results_dir.glob("explain-*/explain.json"))
    return runs[-1].parent if runs else None


def newest_cells(results_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every (model, framework, phase) any explain run under ``results_dir``
    analysed, from the newest run that has it, with that run's folder.  An
    analysis that cannot be read (``harness.report.explain_runs.cells``), and
    a cell that does not hold what :func:`markdown` shows
    (``harness.report.explain_runs.Cell``), is named once on stderr and passed
    over."""
    found: dict[tuple[str, str, str], tuple[Path, dict[str, Any]]] = {}
    for folder in sorted(p.parent for p in results_dir.glob("explain-*/explain.json")):
        cells = analysis.cells(folder)
        kept = [c for c in cells or [] if validated.fits(analysis.Cell, c)]
        if cells is not None and len(kept) < len(cells):
            n = len(cells) - len(kept)
            jsonl.warn(
                f"warning: skipped {n} cell{'s' * (n != 1)} of "
                f"{folder / 'explain.json'} that hold no figures the report can "
                "show (a field missing, of another type or out of range)"
            )
        for cell in kept:
            key = (cell["model"], cell["framework"], cell["phase"])
            found[key] = (folder, cell)
    return [
        found[k] for k in sorted(found, key=lambda k: (k[0], k[1], k[2] != "train"))
    ]


# --- Markdown -------------------------------------------------------------------


def _us(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.1f}"


def _ci(d: dict[str, float]) -> str:
    return f"{_us(d['us'])} [{_us(d['low'])}, {_us(d['high'])}]"


def markdown(
    found: list[dict[str, Any]], skipped: list[dict[str, Any]] | None = None
) -> str:
    """The explain section: per cell, its parts, its sweep and its profile."""
    out = ["## Where Keras' cost goes (`harness explain`)", ""]
    for cell in found:
        unit = "µs per step" if cell["phase"] == "train" else "µs per mini-batch"
        title = f"{cell['model']} {cell['phase']} on {cell['framework']}"
        out += [f"### {title} (batch {cell['batch']})", ""]
        if cell.get("unverified"):
            out += [
                "**UNVERIFIED**: measured with --allow-unverified; not every "
                "level passed the equivalence gate.",
                "",
            ]
        if cell.get("contended"):
            out += [
                f"**BUSY MACHINE**: other processes took CPU time during "
                f"{cell['contended']} of the {cell['requests']} requests "
                "measured here; these figures may not hold on a quiet machine.",
                "",
            ]
        if "parts" in cell:
            out += _parts_table(cell, unit)
        if cell.get("sweep"):
            out += _sweep_table(cell)
        if cell.get("profile"):
            out += _profile_table(cell)
    for line in skipped or []:
        where = " ".join(
            str(line.get(k, "")) for k in ("model", "framework", "phase", "batch")
        )
        out.append(f"- not measured: {where.strip()}: {line.get('why')}")
    return "\n".join(out) + "\n"


def _parts_table(cell: dict[str, Any], unit: str) -> list[str]:
    total = cell["total"]["us"]
    rows = [
        f"| part | {unit} [95% CI] | share of the Keras step |",
        "| --- | ---: | ---: |",
    ]
    for name in reversed(decompose.PARTS):
        part = cell["parts"].get(name)
        if part is None:
            continue
        rows.append(f"| {name} | {_ci(part)} | {part['us'] / total:.0%} |")
    keras = "fit" if cell["phase"] == "train" else "predict"
    rows.append(f"| **Keras ({keras} on NumPy)** | {_ci(cell['total'])} | 100% |")
    ratio = cell["ratio"]
    return [
        *rows,
        "",
        f"The parts sum to {_us(cell['sum_of_parts_us'])} µs against the measured "
        f"{_us(total)} µs ({cell['closure']:+.1%} of the step); Keras over native "
        f"{ratio['value']:.2f}x [{ratio['low']:.2f}, {ratio['high']:.2f}], from "
        f"{cell['processes']} processes and {cell['blocks']} blocks of all four "
        "levels.",
        "",
    ]


def _sweep_table(cell: dict[str, Any]) -> list[str]:
    s = cell["sweep"]
    rows = [
        f"Batch sizes {', '.join(map(str, s['batches']))}, fitted as t(b) = a + c·b:",
        "",
        "| level | fixed a, µs [95% CI] | per sample c, µs [95% CI] | worst misfit |",
        "| --- | ---: | ---: | ---: |",
    ]
    for path, f in s["fits"].items():
        fixed = {"us": f["fixed_us"], "low": f["fixed_low"], "high": f["fixed_high"]}
        per = f"{f['per_sample_us']:.2f}"
        per_ci = f"[{f['per_sample_low']:.2f}, {f['per_sample_high']:.2f}]"
        rows.append(
            f"| {path} | {_ci(fixed)} | {per} {per_ci} | {f['worst_residual']:.0%} |"
        )
    if "breakeven_batch" not in s:  # no Keras level (MXNet)
        return [*rows, ""]
    b = s["breakeven_batch"]
    when = (
        "never (Keras' per-sample cost does not outgrow its added fixed cost)"
        if b is None
        else f"from batch {b:,.0f}"
        + (" (extrapolated beyond the sweep)" if s["breakeven_extrapolated"] else "")
    )
    return [
        *rows,
        "",
        f"The fixed cost Keras adds falls below 10% of its step {when}.",
        "",
    ]


def _profile_table(cell: dict[str, Any]) -> list[str]:
    p = cell["profile"]
    rows = [
        "| level | kernel share | kernel µs | profiler slowdown "
        "| top operators (µs, calls per step) |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for path in cell["paths"]:
        if path not in p:
            continue
        entry = p[path]
        share = (
            "n/a" if entry["kernel_share"] is None else f"{entry['kernel_share']:.0%}"
        )
        top = "; ".join(f"{n} {_us(us)} ({calls:g})" for n, us, calls in entry["top"])
        slowdown = entry.get("profiler_slowdown")
        slower = "n/a" if slowdown is None else f"{slowdown:.2f}x"
        kernel = _us(entry["kernel_us"])
        rows.append(f"| {path} | {share} | {kernel} | {slower} | {top} |")
    out = [
        *rows,
        "",
        f"Profiler: {p['profiler']}; slowdown: the profiled wall time over the "
        "level's timed time.",
    ]
    if p.get("distorted"):
        out.append(
            f"The profiler slowed {', '.join(p['distorted'])}: their kernel times "
            "do not describe the timed steps, so extra kernels are left inside "
            "layers and optimizer."
        )
    sided = p.get("one_sided")
    if sided:
        for side, ops in sided.items():
            shown = ", ".join(f"{n} ({_us(us)} µs)" for n, us in ops[:8]) or "none"
            out.append(f"Operators {side}: {shown}.")
    return [*out, ""]
