"""``python -m harness run``: time every model on every path, both phases.

First the gate (``harness.core.gate``): every path gets a cached or fresh
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
per repeat instead and alternate timed blocks (``harness.bench.pairing``); their
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

import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from harness.bench import pairing
from harness.core import machines, records
from harness.core.cells import (
    Cell,
    Plan,
    Unit,
    cell_of,
    extension,
    new_plan,
    plan_file,
    read_plan,
    write_plan,
)
from harness.core.flops import step_flops
from harness.core.gate import (
    cached_verdict,
    checked_batches,
    checked_weights,
    verdict_keys,
    verify,
)
from harness.core.peak import measure_matmul_peak
from harness.core.profiles import Profile, Settings
from harness.core.progress import Progress
from harness.core.resources import resource_summary
from harness.core.seeds import WEIGHTS_SEED
from workers.launch import Worker, thread_environment
from workers.messages import Infer, Paired, PairedAnswer, Train, encode
from zoo.specs import get_spec

LATENCY_SAMPLES = 10


def summarize(
    phase: str, values: dict[str, Any], resources: dict[str, Any], flops: int
) -> dict[str, Any]:
    """The figures a report reads: medians, latency percentiles, the work
    done per timed unit (``flops``: per step or per mini-batch, from the
    spec, ``harness.core.flops``) and the worker's resource use."""
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
        training = settings.training()
        # One timed run per process: the repeats are fresh processes.
        return Train(
            **files,
            steps=training.train_steps,
            runs=1,
            warmup_runs=training.warmup_runs,
        )
    inference = settings.inference()
    return Infer(
        **files,
        window_s=inference.window_s,
        warmup_rounds=inference.warmup_rounds,
        latency_samples=LATENCY_SAMPLES if settings.latency else 0,
    )


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
        (cell_of(r), r.repeat)
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
    executor: Executor | None = None,
) -> Path:
    """Measure every cell ``repeats`` times; returns the records file.

    ``slowdown``: native path -> factor, a deliberate slowdown of that path's
    paired blocks (``--inject-slowdown``), to check that ``report --compare``
    sees a known change.  ``executor``: what runs the plan's units (default:
    :class:`Local`, here, one after the other; ``harness.bench.slurm``: a job
    array).

    Raises :class:`RunStoppedError` on Ctrl-C or when a record cannot be
    written, ValueError when the profile leaves a setting of ``phases`` unset."""
    profile.require(phases, models)
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
            executor=executor or Local(),
        )
    except KeyboardInterrupt:
        raise RunStoppedError("interrupted", out, 130) from None
    except records.RecordsWriteError as exc:
        raise RunStoppedError(str(exc), out, 1) from None


class Executor(Protocol):
    """Runs some units of a plan whose file is written; returns when every
    one of them has its records in the plan's records file (or has failed
    for good)."""

    def execute(self, plan: Plan, units: list[Unit], context: RunContext) -> None: ...


@dataclass
class RunContext:
    """What the executors of one run share."""

    plan_path: Path
    results_dir: Path
    out: Path
    verdicts: dict[str, dict[str, str]]
    standing: dict[pairing.PairCell, pairing.Standing]
    progress: Progress


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
    executor: Executor,
) -> Path:
    if done:
        host = records.host_platform()
        host["threads"] = thread_environment(profile.threads)
        _check_resumable(out, profile, host)
    keys: dict[str, dict[str, str]] = {}
    verdicts = verify(
        models,
        paths,
        results_dir,
        weights_seed=WEIGHTS_SEED,
        timeout=profile.timeout_s,
        keys_out=keys,
    )
    plan = new_plan(
        run_id,
        profile,
        models=models,
        paths=paths,
        phases=phases,
        keys=keys,
        allow_unverified=allow_unverified,
        slowdown=slowdown,
    )
    plan_path = plan_file(results_dir, run_id)
    write_plan(plan, plan_path)
    if done:
        print(
            f"resuming {out}: {sum(done.values())} cell repeats done", file=sys.stderr
        )
    pairs = sum(1 for u in plan.units if u.paired)
    print(
        f"run {run_id}: {len(plan.units)} units ({pairs} of them Keras/native pairs, "
        f"more rounds of pairs as their ratios need), profile {profile.name}, "
        f"plan {plan_path}, records in {out}",
        file=sys.stderr,
    )
    context = RunContext(
        plan_path,
        results_dir,
        out,
        verdicts,
        pairing.standings(records.read(out)) if done else {},
        Progress(),
    )
    todo = [u for u in plan.units if not _done(u, done)]
    executor.execute(plan, todo, context)
    while True:
        extra = extension(plan, records.read(out) if out.is_file() else [], keys)
        if not extra:
            break
        plan = plan.model_copy(update={"units": (*plan.units, *extra)})
        write_plan(plan, plan_path)
        executor.execute(plan, [u for u in extra if not _done(u, done)], context)
    return out


def _done(unit: Unit, done: Counter[tuple[Cell, int]]) -> bool:
    """Whether every cell of ``unit`` already has its record (``--resume``)."""
    return all((cell, unit.repeat) in done for cell in unit.cells())


@dataclass
class Local:
    """Runs units here, one after the other, one worker alive at a time; a
    worker serves consecutive units of one path (or pair), repeat and thread
    count unless the profile wants a fresh one per cell."""

    def execute(self, plan: Plan, units: list[Unit], context: RunContext) -> None:
        if not units:
            return
        measuring = Measuring.of(plan, context.results_dir, context.out)
        workers = _Workers(measuring.profile)
        context.progress.add(len(units))
        try:
            for unit in units:
                measuring.unit(
                    unit,
                    workers,
                    context.verdicts[unit.model],
                    context.standing,
                    label=f"{context.progress.line()} r{unit.repeat + 1} ",
                )
                context.progress.advance()
        finally:
            workers.close()


def run_cell(plan_path: Path, index: int, results_dir: Path) -> list[records.Record]:
    """Run unit ``index`` of the plan in ``plan_path`` in a fresh worker and
    append its records to ``<results_dir>/run-<run id>.jsonl``; returns
    them.  What a Slurm array task or a Kubernetes pod runs.

    The unit's paths are timed only when ``<results_dir>/verdicts.json``
    holds a passing verdict under the keys the plan names *and* those keys
    are what this environment computes (``cells`` module docstring)."""
    plan = read_plan(plan_path)
    if not 0 <= index < len(plan.units):
        raise ValueError(
            f"{plan_path} has units 0 to {len(plan.units) - 1}, not {index}"
        )
    unit = plan.units[index]
    _writable_folder(results_dir)
    out = results_dir / f"run-{plan.run_id}.jsonl"
    measuring = Measuring.of(plan, results_dir, out)
    verdicts = _unit_verdicts(unit, results_dir)
    standing = pairing.standings(records.read(out)) if out.is_file() else {}
    workers = _Workers(measuring.profile)
    try:
        measuring.unit(unit, workers, verdicts, standing, label=f"[{index}] ")
    except KeyboardInterrupt:
        raise RunStoppedError("interrupted", out, 130) from None
    except records.RecordsWriteError as exc:
        raise RunStoppedError(str(exc), out, 1) from None
    finally:
        workers.close()
    mine = {(cell, unit.repeat) for cell in unit.cells()}
    written = [r for r in records.read(out) if (cell_of(r), r.repeat) in mine]
    return written[-len(mine) :]


def _unit_verdicts(unit: Unit, results_dir: Path) -> dict[str, str]:
    """The verdict of each of ``unit``'s paths: the cached one under the
    plan's key, ``stale`` when this environment computes another key (code
    or libraries differ from what the gate checked), ``unchecked`` when the
    gate has not judged it."""
    here = verdict_keys(
        [unit.model], list(unit.paths), results_dir, weights_seed=WEIGHTS_SEED
    )[unit.model]
    out = {}
    for path in unit.paths:
        key = unit.verdict_keys.get(path)
        found = cached_verdict(results_dir, key) if key else None
        if key is not None and here[path] != key:
            out[path] = "stale"
        else:
            out[path] = "unchecked" if found is None else found[0]
    return out


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
        mine, theirs = host.get(key), before.get(key)
        if key == "machine":  # another node of the same machine may resume
            mine, theirs = machines.pooled(host), machines.pooled(before)
        if key == "threads" and profile.thread_counts is not None:
            continue  # a sweep's counts are its cells'; the plan compares them
        if key in host and key in before and mine != theirs:
            raise ValueError(
                f"--resume: {out} was measured with {key} {theirs!r}, this "
                f"machine has {mine!r}; its samples cannot be pooled with "
                "new ones, so start a new run instead"
            )


@dataclass
class _Workers:
    """The one worker process alive: a path's (or a Keras/native pair's) for
    one repeat and thread count, replaced for the next path, repeat or cell as
    the profile says, and after a crash."""

    profile: Profile
    worker: Worker | None = None
    serving: tuple[Any, ...] | None = None

    def get(self, unit: Unit, path: str, partner: str | None = None) -> Worker:
        key = (path, partner, unit.repeat, unit.threads)
        if (
            self.worker is None
            or key != self.serving
            or self.profile.fresh_worker_per_cell
            or _gone(self.worker)
        ):
            self.close()  # before the next one measures
            threads = _threads(self.profile, unit.threads)
            self.worker = Worker(
                path,
                env=threads["env"],
                partner=partner,
                cpus=_cpus(self.profile, unit.threads),
            )
            self.serving = key
        return self.worker

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close(kill=True)
            self.worker = None


def _threads(profile: Profile, count: int | None) -> dict[str, Any]:
    """The thread settings of a unit: the profile's, or on a thread sweep
    ``count`` intra-op threads and one inter-op thread."""
    if count is None:
        return thread_environment(profile.threads)
    return thread_environment({"intra_op": count, "inter_op": 1})


def _cpus(profile: Profile, count: int | None) -> tuple[int, ...] | None:
    """The CPUs a unit's worker is pinned to: the profile's, or on a thread
    sweep the first ``count`` this process may use (so a count is a number of
    cores, not only of threads).

    Raises ValueError when this machine has fewer than ``count`` CPUs."""
    if count is None:
        return profile.pin_cpus
    usable = sorted(os.sched_getaffinity(0))
    if count > len(usable):
        raise ValueError(
            f"thread count {count} needs {count} CPUs; this process may use "
            f"{len(usable)}"
        )
    return tuple(usable[:count])


def _gone(worker: Worker) -> bool:
    """Whether ``worker`` started, then crashed or was killed at a timeout,
    and so must be replaced before the next cell.  A worker that never
    started (its framework missing, a hang at start-up) stays failed for this
    path and repeat: a new one would fail the same way, after another wait."""
    return worker.failure is not None and worker.started


def matmul_peak(results_dir: Path, run_id: str) -> dict[str, Any]:
    """This machine's float32 matmul peak for run ``run_id``: measured once
    per run and machine (kept in ``<results>/cache``), so the units of a run
    that another process or node runs share the figure of their machine."""
    host = records.host_platform()["hostname"]
    kept = results_dir / "cache" / f"peak-{run_id}-{host}.json"
    try:
        found: dict[str, Any] = json.loads(kept.read_text())
        if isinstance(found.get("flops_per_s"), float):
            return found
    except (OSError, ValueError):
        pass
    print("measuring this machine's float32 matmul peak ...", file=sys.stderr)
    peak = dict(measure_matmul_peak())
    kept.parent.mkdir(parents=True, exist_ok=True)
    tmp = kept.with_name(f".{kept.name}.{os.getpid()}")
    tmp.write_text(json.dumps(peak))
    tmp.replace(kept)
    return peak


@dataclass
class Measuring:
    """What every record of one run shares, and how a unit is measured."""

    plan: Plan
    profile: Profile
    out: Path
    cache: Path
    host: dict[str, Any]
    checked: dict[tuple[Any, ...], tuple[Path, str]] = field(default_factory=dict)

    @classmethod
    def of(cls, plan: Plan, results_dir: Path, out: Path) -> Measuring:
        host = records.host_platform()
        host["matmul_peak"] = matmul_peak(results_dir, plan.run_id)
        host["matmul_peak_flops"] = host["matmul_peak"]["flops_per_s"]
        return cls(plan, plan.get_profile(), out, results_dir / "cache", host)

    def unit(
        self,
        unit: Unit,
        workers: _Workers,
        verdicts: dict[str, str],
        standing: dict[pairing.PairCell, pairing.Standing],
        label: str,
    ) -> None:
        """Measure ``unit`` (or write why it is not timed), printing a
        progress line per process."""
        timeable = {
            p: self.plan.allow_unverified or verdicts[p] in ("pass", "unavailable")
            for p in unit.paths
        }
        if unit.paired and all(timeable.values()):
            name = label + unit.name()
            print(f"{name} ...", file=sys.stderr, flush=True)
            keras, native = unit.paths
            worker = workers.get(unit, keras, partner=native)
            pair = standing.setdefault(unit.pair_cell(), pairing.Standing())
            line = self.measure_pair(worker, unit, verdicts, pair)
            print(f"{name}: {line}", file=sys.stderr, flush=True)
            return
        for cell in unit.cells():
            name = label + cell.name()
            verdict = verdicts[cell.path]
            if not timeable[cell.path]:
                record = self.held_back(cell, unit.repeat, verdict)
                print(f"{name}: {_describe(record)}", file=sys.stderr, flush=True)
                continue
            print(f"{name} ...", file=sys.stderr, flush=True)
            worker = workers.get(unit, cell.path)
            record = self.measure(worker, cell, unit.repeat, verdict)
            print(f"{name}: {_describe(record)}", file=sys.stderr, flush=True)

    def _record(
        self,
        cell: Cell,
        repeat: int,
        platform: dict[str, Any],
        settings: dict[str, Any] | None = None,
        **fields: Any,
    ) -> records.Record:
        """Append the record of ``cell``'s ``repeat``: the machine's platform,
        the unit's thread settings, then ``platform`` (the worker's)."""
        threads = _threads(self.profile, cell.threads)
        if cell.threads is not None:  # a thread sweep: the count is the cell's
            settings = {**(settings or {}), "threads": cell.threads}
        record = records.make(
            self.plan.run_id,
            self.profile.name,
            profile_digest=self.profile.digest(),
            model=cell.model,
            path=cell.path,
            phase=cell.phase,
            batch_size=cell.batch_size,
            repeat=repeat,
            host=self.host,
            platform={"threads": threads, **platform},
            settings=settings or {},
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
            platform={},
            error=_held_back_because(verdict),
        )

    def measure(
        self, worker: Worker, cell: Cell, repeat: int, verdict: str
    ) -> records.Record:
        spec = get_spec(cell.model)
        settings = self.profile.settings(cell.model)
        count = settings.batches(cell.phase)
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
            platform=worker.platform,
            error=error,
        )

    def measure_pair(
        self,
        worker: Worker,
        unit: Unit,
        verdicts: dict[str, str],
        standing: pairing.Standing,
    ) -> str:
        """One process' paired blocks of ``unit``: two records, one per path,
        and ``standing`` brought up to date; returns the progress line."""
        cell, repeat = unit.pair_cell(), unit.repeat
        spec = get_spec(cell.model)
        settings = self.profile.settings(cell.model)
        count = settings.batches(cell.phase)
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
            steps=settings.training().train_steps if train else 1,
            window_s=settings.pair_window_s,
            min_blocks=settings.pair_min_blocks,
            warmup_runs=max(
                1, settings.warmup_runs if train else settings.inference().warmup_rounds
            ),
            seed=unit.seed,
            slowdown=self.plan.slowdown.get(cell.native, 1.0),
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
                Cell(cell.model, path, cell.phase, cell.batch_size, cell.threads),
                repeat,
                status=status,
                equivalence=verdicts[path],
                verified=verdicts[path] == "pass",
                values=values.get(api, {}),
                summary=summary,
                settings=settings_used,
                platform=platform,
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
        per run (``harness.core.gate.checked_weights``/``checked_batches``)."""
        key = (check.__name__, *(getattr(a, "name", a) for a in args))
        if key not in self.checked:
            self.checked[key] = check(*args, self.cache)
        return self.checked[key]


def _held_back_because(verdict: str) -> str:
    """Why a cell with ``verdict`` was not timed, and what to do about it."""
    if verdict == "stale":
        return (
            "equivalence verdict 'stale': the code or libraries here are not "
            "those the gate checked (the verdict key differs); not timed"
        )
    if verdict == "unchecked":
        return (
            "equivalence verdict 'unchecked': the gate has no verdict under this "
            "cell's key in the results folder; run 'python -m harness gate' "
            "first; not timed"
        )
    return (
        f"equivalence verdict {verdict!r}: not timed; pass --allow-unverified "
        "to time it anyway"
    )


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
