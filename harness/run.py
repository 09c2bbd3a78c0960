"""``python -m harness run``: time every model on every path, both phases.

First the gate (``harness.gate``): every path gets a cached or fresh
equivalence verdict for every model.  A path without a passing verdict is not
timed (its cells get a ``not-timed`` record saying why) unless
``allow_unverified`` is set; then it is timed and its records say
``verified: false``, which every report row shows.

The protocol.  A cell is (model, path, phase, batch size); inference cells
sweep the profile's ``infer_batch_sizes``.  Every cell is measured
``repeats`` times, each time in a fresh worker process: repeat ``r`` starts
one new worker per path, which measures all of that path's cells and is ended
before the next path's worker starts (one worker alive at a time), and the
order of the paths rotates from one repeat to the next, so slow drift
on a shared machine (thermal, other jobs) is spread over all paths alike.
Keras on a backend and the native path of that framework share one worker
per repeat instead and alternate timed blocks (``harness.pairing``); their
cells get more repeats, one round at a time, until the overhead ratio is
known to ``ratio_target``.  In
each process the first step (compilation, tracing, allocation) and the
warm-up are timed apart from the steady state.  Thread settings are set
explicitly for every worker (``workers.launch.thread_environment``) and
recorded.

Records are appended to ``<results>/run-<timestamp>.jsonl`` as each cell's
repeat ends, so a crash loses nothing measured; ``resume`` continues an
interrupted run in the same file without redoing finished cell repeats.  A
record that cannot be written whole (a full disk) or Ctrl-C stops the run
with :class:`RunStoppedError`, whose message says how to resume; every record written
before is kept.

Nothing false is recorded as measured: every request names the content
digests of the weights and batches the gate vouches for (the worker refuses
other arrays), and a run that produced NaN or inf (its answer's
``nonfinite``) is recorded as ``diverged``, never ``ok``.  A worker that
crashed or timed out is replaced before the next cell.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import tempfile
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import pairing, records
from harness.flops import step_flops
from harness.gate import checked_batches, checked_weights, verify
from harness.peak import measure_matmul_peak
from harness.profiles import Profile, Settings
from workers.launch import Worker, thread_environment
from workers.messages import Infer, Paired, PairedAnswer, Train, encode
from workers.paths import get_path
from workers.resources import contended
from zoo.specs import get_spec

WEIGHTS_SEED = 0
DATA_SEED = 1  # the floors benchmark's; runs take the profile's seed


LATENCY_SAMPLES = 10
# workers.resources: the worker's own use, and the machine's other work
RESOURCE_KEYS = (
    "cpu_util",
    "peak_rss_mb",
    "peak_gpu_mb",
    "wall_s",
    "others_cpu",
    "steal_frac",
)


def summarize(
    phase: str, values: dict[str, Any], resources: dict[str, Any], flops: int
) -> dict[str, Any]:
    """The figures a report reads: medians, latency percentiles, the work
    done per timed unit (``flops``: per step or per mini-batch, from the
    spec, ``harness.flops``) and the worker's resource use."""
    summary: dict[str, Any] = {"flops": flops}
    if phase == "train":
        summary |= {
            "median_step_s": statistics.median(values["step_s"]),
            "first_step_s": values["first_step_s"],
        }
    else:
        summary |= {
            "first_round_s": values["first_round_s"],
            "batches_per_s": values["batches_per_s"],
            "median_batch_s": statistics.median(values["round_s"])
            / values["batches_per_round"],
        }
        summary |= {k: v for k, v in values.items() if k.startswith("latency_p")}
    return summary | resource_summary(resources)


def resource_summary(resources: dict[str, Any]) -> dict[str, Any]:
    """The worker's resource use and whether the machine was busy meanwhile
    (``workers.resources.contended``)."""
    # A value that is not finite (a worker gone before its CPU time was read)
    # is left out: the records reader refuses times that are not numbers.
    found = {
        k: v
        for k, v in resources.items()
        if k in RESOURCE_KEYS and isinstance(v, int | float) and math.isfinite(v)
    }
    return found | {"contended": contended(resources)}


def _request(
    settings: Settings,
    model: str,
    phase: str,
    weights: tuple[Path, str],
    data: tuple[Path, str],
) -> Train | Infer:
    """The request for one cell; ``weights`` and ``data`` are (file, content
    digest), which the worker checks before it times anything."""
    files = {
        "model": model,
        "weights": str(weights[0]),
        "weights_digest": weights[1],
        "data": str(data[0]),
        "data_digest": data[1],
    }
    if phase == "train":
        # One timed run per process: the repeats are fresh processes.
        return Train(
            **files,
            steps=settings.train_steps,
            runs=1,
            warmup_runs=settings.warmup_runs,
        )
    return Infer(
        **files,
        window_s=settings.window_s,
        warmup_rounds=settings.warmup_rounds,
        latency_samples=LATENCY_SAMPLES if settings.latency else 0,
    )


@dataclass(frozen=True)
class Cell:
    model: str
    path: str
    phase: str
    batch_size: int


def plan(
    profile: Profile, models: list[str], paths: list[str], phases: list[str]
) -> list[Cell]:
    """Every cell, grouped by model and phase; inference sweeps batch sizes."""
    cells = []
    for model in models:
        spec = get_spec(model)
        settings = profile.settings(model)
        batch = settings.batch_size or spec.workload.batch_size
        for phase in phases:
            sizes = (
                settings.infer_batch_sizes or (batch,) if phase == "infer" else (batch,)
            )
            cells += [Cell(model, p, phase, b) for b in sizes for p in paths]
    return cells


class RunStoppedError(Exception):
    """The run ended before its last cell (Ctrl-C, or a record that could not
    be written); ``out`` holds every record written before."""

    def __init__(self, reason: str, out: Path, exit_code: int) -> None:
        super().__init__(reason)
        self.out, self.exit_code = out, exit_code


def _writable_folder(results_dir: Path) -> None:
    """Raises ValueError, in one sentence, unless ``results_dir`` is (or can
    be made) a folder this process can write files in."""
    if results_dir.exists() and not results_dir.is_dir():
        raise ValueError(f"--results {results_dir} is a file; give a folder")
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=results_dir) as probe:
            probe.write(b"probe\n" * 512)
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as exc:
        raise ValueError(
            f"--results {results_dir}: cannot write there ({exc.strerror or exc})"
        ) from None


def _open(
    results_dir: Path, resume: Path | None
) -> tuple[str, Path, Counter[tuple[Cell, int]]]:
    """The run id, its records file and the cell repeats already finished."""
    if resume is None:
        run_id = time.strftime("%Y%m%d-%H%M%S")
        return run_id, results_dir / f"run-{run_id}.jsonl", Counter()
    if not resume.is_file():
        raise FileNotFoundError(f"--resume: no records file {resume}")
    try:
        with resume.open("ab"):
            pass
    except OSError as exc:
        raise ValueError(
            f"--resume: cannot append to {resume} ({exc.strerror or exc})"
        ) from None
    done: Counter[tuple[Cell, int]] = Counter(
        (Cell(r.model, r.path, r.phase, r.batch_size), r.repeat)
        for r in records.read(resume)
        if r.status in ("ok", "not-timed")
    )
    return resume.stem.removeprefix("run-"), resume, done


def run(
    profile: Profile,
    *,
    models: list[str],
    paths: list[str],
    phases: list[str],
    results_dir: Path,
    allow_unverified: bool = False,
    resume: Path | None = None,
    slowdown: dict[str, float] | None = None,
) -> Path:
    """Measure every cell ``repeats`` times; returns the records file.

    ``slowdown``: native path -> factor, a deliberate slowdown of that path's
    paired blocks (``--inject-slowdown``), to check that ``report --compare``
    sees a known change.

    Raises :class:`RunStoppedError` on Ctrl-C or when a record cannot be written."""
    _writable_folder(results_dir)
    run_id, out, done = _open(results_dir, resume)
    try:
        return _run(
            profile,
            run_id,
            out,
            done,
            models=models,
            paths=paths,
            phases=phases,
            results_dir=results_dir,
            allow_unverified=allow_unverified,
            slowdown=slowdown or {},
        )
    except KeyboardInterrupt:
        raise RunStoppedError("interrupted", out, 130) from None
    except records.RecordsWriteError as exc:
        raise RunStoppedError(str(exc), out, 1) from None


def _run(
    profile: Profile,
    run_id: str,
    out: Path,
    done: Counter[tuple[Cell, int]],
    *,
    models: list[str],
    paths: list[str],
    phases: list[str],
    results_dir: Path,
    allow_unverified: bool,
    slowdown: dict[str, float],
) -> Path:
    host = records.host_platform()
    threads = thread_environment(profile.threads)
    host["threads"] = threads
    if done:
        _check_resumable(out, profile, host)
    verdicts = verify(
        models,
        paths,
        results_dir,
        weights_seed=WEIGHTS_SEED,
        timeout=profile.timeout_s,
    )
    print("measuring this machine's float32 matmul peak ...", file=sys.stderr)
    host["matmul_peak"] = measure_matmul_peak()
    host["matmul_peak_flops"] = host["matmul_peak"]["flops_per_s"]
    cells = plan(profile, models, paths, phases)
    timeable = {
        (c.model, c.path)
        for c in cells
        if allow_unverified or verdicts[c.model][c.path] in ("pass", "unavailable")
    }
    pairs, singles = _split(cells, pairing.paired_frameworks(profile, paths), timeable)
    standing = pairing.standings(records.read(out)) if done else {}
    repeats = max(profile.settings(m).repeats for m in models)
    if done:
        print(
            f"resuming {out}: {sum(done.values())} cell repeats done", file=sys.stderr
        )
    print(
        f"run {run_id}: {len(cells)} cells ({len(pairs)} Keras/native pairs) x "
        f"{repeats} repeats or more, profile {profile.name}, records in {out}",
        file=sys.stderr,
    )
    context = _Context(
        profile, run_id, out, results_dir / "cache", host, threads, dict(slowdown)
    )
    workers = _Workers(profile, threads["env"])
    progress = _Progress()
    try:
        rounds = max(
            max(profile.settings(m).repeats, profile.settings(m).max_repeats)
            for m in models
        )
        for repeat in range(rounds):
            units: list[Cell | pairing.PairCell] = [
                c
                for c in _rotated(singles, paths, repeat)
                if repeat < profile.settings(c.model).repeats
                and (c, repeat) not in done
            ]
            units += [
                pc
                for pc in pairs
                if repeat not in standing.setdefault(pc, pairing.Standing()).repeats
                and _wanted(standing[pc], repeat, profile, pc.model)
            ]
            if not units and repeat >= repeats:
                break
            progress.add(len(units))
            for unit in units:
                label = f"{progress.next()} r{repeat + 1} "
                if isinstance(unit, pairing.PairCell):
                    label += unit.name()
                    print(f"{label} ...", file=sys.stderr, flush=True)
                    worker = workers.get(unit.keras, repeat, partner=unit.native)
                    line = context.measure_pair(
                        worker, unit, repeat, verdicts, standing[unit]
                    )
                    print(f"{label}: {line}", file=sys.stderr, flush=True)
                    continue
                label += _name(unit)
                verdict = verdicts[unit.model][unit.path]
                if (unit.model, unit.path) not in timeable:
                    record = context.held_back(unit, repeat, verdict)
                    print(f"{label}: {_describe(record)}", file=sys.stderr, flush=True)
                    continue
                print(f"{label} ...", file=sys.stderr, flush=True)
                worker = workers.get(unit.path, repeat)
                record = context.measure(worker, unit, repeat, verdict)
                print(f"{label}: {_describe(record)}", file=sys.stderr, flush=True)
    finally:
        workers.close()
    return out


def _split(
    cells: list[Cell], frameworks: list[str], timeable: set[tuple[str, str]]
) -> tuple[list[pairing.PairCell], list[Cell]]:
    """The pair cells (both sides timeable, framework paired) and the cells
    measured on their own (everything else, held-back ones included)."""
    pairs: dict[pairing.PairCell, None] = {}
    singles = []
    for c in cells:
        framework = get_path(c.path).framework
        pc = pairing.PairCell(c.model, framework, c.phase, c.batch_size)
        if (
            c.path in (pc.keras, pc.native)  # not another mode of either
            and framework in frameworks
            and {
                (c.model, pc.keras),
                (c.model, pc.native),
            }
            <= timeable
        ):
            pairs[pc] = None
        else:
            singles.append(c)
    return list(pairs), singles


def _wanted(
    standing: pairing.Standing, repeat: int, profile: Profile, model: str
) -> bool:
    """Whether a pair cell gets a process in round ``repeat``: always within
    its ``repeats``, after that while ``pairing.stop_reason`` finds none."""
    if repeat < profile.settings(model).repeats:
        return True
    return (
        pairing.stop_reason(standing, len(standing.repeats), profile, model)[0] is None
    )


@dataclass
class _Workers:
    """The one worker process alive: a path's (or a Keras/native pair's) for
    one repeat, replaced for the next path, repeat or cell as the profile
    says, and after a crash."""

    profile: Profile
    env: dict[str, str]
    worker: Worker | None = None
    serving: tuple[str, int] | None = None

    def get(self, path: str, repeat: int, partner: str | None = None) -> Worker:
        key = (f"{path}+{partner}", repeat)
        if (
            self.worker is None
            or key != self.serving
            or self.profile.fresh_worker_per_cell
            or _gone(self.worker)
        ):
            self.close()  # before the next one measures
            self.worker = Worker(
                path, env=self.env, partner=partner, cpus=self.profile.pin_cpus
            )
            self.serving = key
        return self.worker

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close(kill=True)
            self.worker = None


class _Progress:
    """``[i/total 40% ####------ 3m10s elapsed, ~4m left]``; the total grows
    when adaptive rounds add processes."""

    def __init__(self) -> None:
        self.total, self.i, self.start = 0, 0, time.perf_counter()

    def add(self, units: int) -> None:
        self.total += units

    def next(self) -> str:
        self.i += 1
        return _progress(self.i, self.total, self.start)


def _gone(worker: Worker) -> bool:
    """Whether ``worker`` started, then crashed or was killed at a timeout,
    and so must be replaced before the next cell.  A worker that never
    started (its framework missing, a hang at start-up) stays failed for this
    path and repeat: a new one would fail the same way, after another wait."""
    return worker.failure is not None and worker.started


def _check_resumable(out: Path, profile: Profile, host: dict[str, Any]) -> None:
    """Raises ValueError when this machine, code or profile differs from the
    one that wrote ``out``: the report would refuse to pool the two halves.
    Profiles are compared by content (``Profile.digest``), so a renamed copy
    of a blueprint resumes and an edited one does not; records older than
    schema 4 carry only the profile's name."""
    earlier = next(r for r in records.read(out) if r.status in ("ok", "not-timed"))
    if earlier.profile_digest is None and earlier.profile != profile.name:
        raise ValueError(
            f"--resume: {out} was measured with profile {earlier.profile!r}, "
            f"not {profile.name!r}; resume it with --profile {earlier.profile}"
        )
    if earlier.profile_digest not in (None, profile.digest()):
        raise ValueError(
            f"--resume: {out} was measured with other settings than profile "
            f"{profile.name!r} holds now (it used profile {earlier.profile!r}); "
            "resume it with the very blueprint it was started with"
        )
    before = earlier.platform
    for key in records.POOLED_KEYS:
        if key in host and key in before and host[key] != before[key]:
            raise ValueError(
                f"--resume: {out} was measured with {key} {before[key]!r}, this "
                f"machine has {host[key]!r}; its samples cannot be pooled with "
                "new ones, so start a new run instead"
            )


def _rotated(cells: list[Cell], paths: list[str], repeat: int) -> list[Cell]:
    """``cells`` with the path order rotated by ``repeat`` places, grouped by
    path so that one worker per path serves a repeat's cells in a row."""
    order = paths[repeat % len(paths) :] + paths[: repeat % len(paths)]
    return sorted(cells, key=lambda c: order.index(c.path))


def _name(cell: Cell) -> str:
    return f"{cell.model} {cell.path} {cell.phase} b{cell.batch_size}"


@dataclass
class _Context:
    """What every record of one run shares, and how a cell repeat is measured."""

    profile: Profile
    run_id: str
    out: Path
    cache: Path
    host: dict[str, Any]
    threads: dict[str, Any]
    slowdown: dict[str, float] = field(default_factory=dict)
    checked: dict[tuple[Any, ...], tuple[Path, str]] = field(default_factory=dict)

    def _record(self, cell: Cell, repeat: int, **fields: Any) -> records.Record:
        path = get_path(cell.path)
        record = records.Record(
            run_id=self.run_id,
            profile=self.profile.name,
            profile_digest=self.profile.digest(),
            model=cell.model,
            path=cell.path,
            framework=path.framework,
            api=path.api,
            phase=cell.phase,
            batch_size=cell.batch_size,
            repeat=repeat,
            **fields,
        )
        records.append(self.out, record)
        return record

    def held_back(self, cell: Cell, repeat: int, verdict: str) -> records.Record:
        return self._record(
            cell,
            repeat,
            status="not-timed",
            equivalence=verdict,
            verified=False,
            platform=self.host,
            error=(
                f"equivalence verdict {verdict!r}: not timed; pass "
                "--allow-unverified to time it anyway"
            ),
        )

    def measure(
        self, worker: Worker, cell: Cell, repeat: int, verdict: str
    ) -> records.Record:
        spec = get_spec(cell.model)
        settings = self.profile.settings(cell.model)
        count = (
            settings.train_steps if cell.phase == "train" else settings.infer_batches
        )
        weights = self._checked(checked_weights, spec, WEIGHTS_SEED)
        data = self._checked(
            checked_batches, spec, self.profile.seed, cell.batch_size, count
        )
        request = _request(settings, cell.model, cell.phase, weights, data)
        reply = worker.call(request, self.profile.timeout_s)
        values = encode(reply.answer) if reply.answer is not None else {}
        status, error = reply.status, reply.error
        nonfinite = getattr(reply.answer, "nonfinite", None)
        if reply.ok and nonfinite:
            status, error = "diverged", f"not finite: {nonfinite}"
        summary = {}
        if status == "ok":
            flops = step_flops(spec, cell.phase, cell.batch_size)
            summary = summarize(cell.phase, values, reply.resources, flops)
        return self._record(
            cell,
            repeat,
            status=status,
            equivalence=verdict,
            verified=verdict == "pass",
            values=values,
            summary=summary,
            settings={
                k: v
                for k, v in encode(request).items()
                if k not in ("weights", "data", "task")
            },
            platform={**self.host, **worker.platform},
            error=error,
        )

    def measure_pair(
        self,
        worker: Worker,
        cell: pairing.PairCell,
        repeat: int,
        verdicts: dict[str, dict[str, str]],
        standing: pairing.Standing,
    ) -> str:
        """One process' paired blocks of ``cell``: two records, one per path,
        and ``standing`` brought up to date; returns the progress line."""
        spec = get_spec(cell.model)
        settings = self.profile.settings(cell.model)
        count = (
            settings.train_steps if cell.phase == "train" else settings.infer_batches
        )
        weights = self._checked(checked_weights, spec, WEIGHTS_SEED)
        data = self._checked(
            checked_batches, spec, self.profile.seed, cell.batch_size, count
        )
        train = cell.phase == "train"
        request = Paired(
            model=cell.model,
            weights=str(weights[0]),
            weights_digest=weights[1],
            data=str(data[0]),
            data_digest=data[1],
            phase=cell.phase,
            steps=settings.train_steps if train else 1,
            window_s=settings.pair_window_s,
            min_blocks=settings.pair_min_blocks,
            warmup_runs=max(
                1, settings.warmup_runs if train else settings.warmup_rounds
            ),
            seed=zlib.crc32(f"{self.profile.seed} {repeat} {cell.name()}".encode()),
            slowdown=self.slowdown.get(cell.native, 1.0),
        )
        reply = worker.call(request, self.profile.timeout_s)
        answer = reply.answer if isinstance(reply.answer, PairedAnswer) else None
        settings_used = {
            k: v
            for k, v in encode(request).items()
            if k not in ("weights", "data", "task")
        }
        shared = resource_summary(reply.resources)
        values = pairing.sides(answer, cell) if answer else {}
        statuses = {}
        for api in ("keras", "native"):
            status, error = reply.status, reply.error
            nonfinite = getattr(answer, f"{api}_nonfinite", None)
            if answer and nonfinite:
                status, error = "diverged", f"not finite: {nonfinite}"
            statuses[api] = (status, error)
        both_ok = all(status == "ok" for status, _ in statuses.values())
        reason, found = None, None
        if both_ok and answer:
            standing.add(repeat, answer.keras_s, answer.native_s)
            standing.spent_s += float(reply.resources.get("wall_s", 0.0))
            reason, found = pairing.stop_reason(
                standing, len(standing.repeats), self.profile, cell.model
            )
        ratio = {}
        if found is not None:
            ratio = {
                "ratio": found.ratio,
                "ratio_low": found.low,
                "ratio_high": found.high,
                "ratio_half_width": found.half_width,
                "ratio_processes": found.processes,
                "stopped": reason,
            }
        flops = step_flops(spec, cell.phase, cell.batch_size)
        for api, path in (("keras", cell.keras), ("native", cell.native)):
            status, error = statuses[api]
            summary = {}
            if status == "ok":
                side = pairing.summary(cell.phase, values[api])
                summary = {"flops": flops, **side, **shared, **ratio}
            platform = worker.platform if api == "keras" else worker.partner_platform
            self._record(
                Cell(cell.model, path, cell.phase, cell.batch_size),
                repeat,
                status=status,
                equivalence=verdicts[cell.model][path],
                verified=verdicts[cell.model][path] == "pass",
                values=values.get(api, {}),
                summary=summary,
                settings=settings_used,
                platform={**self.host, **platform},
                error=error,
            )
        if not both_ok:
            keras_status, keras_error = statuses["keras"]
            native_status, native_error = statuses["native"]
            return (
                f"{keras_status.upper()}/{native_status.upper()}: "
                f"{keras_error or native_error}"
            )
        line = f"{len(answer.keras_s) if answer else 0} block pairs"
        if found is not None:
            line += (
                f", overhead {found.ratio:.3f} (95% CI {found.low:.3f}-"
                f"{found.high:.3f}, +-{found.half_width:.1%} over "
                f"{found.processes} processes)"
            )
        if shared["contended"]:
            line += f", MACHINE BUSY ({shared.get('others_cpu', 0):.2f} cores taken)"
        return line + (f"; stopped: {reason}" if reason else "")

    def _checked(
        self, check: Callable[..., tuple[Path, str]], *args: Any
    ) -> tuple[Path, str]:
        """``check(*args, cache)``: a data file and its digest, checked once
        per run (``harness.gate.checked_weights``/``checked_batches``)."""
        key = (check.__name__, *(getattr(a, "name", a) for a in args))
        if key not in self.checked:
            self.checked[key] = check(*args, self.cache)
        return self.checked[key]


def _progress(i: int, total: int, start: float) -> str:
    """``[i/total 40% ####------ 3m10s elapsed, ~4m left]``: the estimate
    assumes the remaining cells take as long on average as the finished ones."""
    done = (i - 1) / total
    bar = "#" * round(10 * done) + "-" * (10 - round(10 * done))
    elapsed = time.perf_counter() - start
    left = f", ~{_minutes(elapsed / (i - 1) * (total - i + 1))} left" if i > 1 else ""
    return f"[{i}/{total} {bar} {_minutes(elapsed)} elapsed{left}]"


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


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
