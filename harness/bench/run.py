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
per repeat instead and alternate timed blocks (``harness.core.pairing``); their
cells get more repeats, one round at a time, until the overhead ratio is
known to ``ratio_target``.  In
each process the first step (compilation, tracing, allocation) and the
warm-up are timed apart from the steady state.  Thread settings and CPUs
are set explicitly for every worker and recorded
(``harness.core.placement``): by default one intra-op thread in a worker
started on a CPU of its own, its other threads then free to use every CPU,
this process kept off the worker's own while it measures.  Under a
budget (the profile's ``budget_s``, ``--budget``), a planned process starts
only while it fits, and the time left goes to more processes of the pair
cells where they narrow the answer most (``harness.bench.schedule``; read
from :data:`clock`); without one, every planned process, then more until
every pair cell stops by its own caps.

Records are appended to ``<results>/run-<time>-<pid>.jsonl`` as each cell's
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
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Protocol

from pydantic import Field

from harness.bench import schedule
from harness.bench.measure import Measuring
from harness.core import jsonl, machines, pairing, records, validated
from harness.core.cells import (
    PLAN_SUFFIX,
    Cell,
    Closing,
    Plan,
    Unit,
    cell_of,
    new_plan,
    plan_file,
    read_plan,
    write_plan,
)
from harness.core.gate import (
    cached_verdict,
    verdict_keys,
    verify,
    wrong_references,
)
from harness.core.peak import measure_matmul_peak
from harness.core.placement import kept_off, of_profile
from harness.core.profiles import Profile
from harness.core.progress import Progress
from harness.core.seeds import WEIGHTS_SEED
from workers.frameworks import FRAMEWORKS
from workers.launch import Worker
from workers.paths import get_path
from zoo import files

# The most a kept matmul peak (``<results>/cache/peak-<run>-<host>.json``)
# may hold: a figure and a few sources' entries, some kilobytes.
PEAK_BYTES = 1024 * 1024


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
        files.folder(results_dir, follow=True)  # the user named it
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
        # The plan's file, claimed exclusively, makes the id: two runs
        # started in one second never share a records file.
        plan = jsonl.claim(results_dir, "run", PLAN_SUFFIX)
        run_id = plan.name.removeprefix("run-").removesuffix(PLAN_SUFFIX)
        return run_id, results_dir / f"run-{run_id}.jsonl", Counter()
    if not resume.is_file():
        raise FileNotFoundError(f"--resume: no records file {resume}")
    try:
        os.close(files.open_append(resume))  # what appending its records does
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


# The clock the run's budget is read from; tests put a fake one
# in its place (a test never waits on wall-clock time).
clock = time.monotonic


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
        host["threads"] = of_profile(profile, None).record()
        _check_resumable(out, profile, host)
    started = clock()  # the budget counts the gate's time too
    shown_from, budget = time.monotonic(), profile.budget_s  # progress line
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
        Progress(deadline=None if budget is None else shown_from + budget),
    )
    todo = [u for u in plan.units if not _done(u, done)]
    context.progress.add(len(todo))
    costs = schedule.Costs()

    def left() -> float:
        return math.inf if budget is None else budget - (clock() - started)

    def execute(group: list[Unit]) -> None:
        before = len(records.read(out)) if out.is_file() else 0
        began = clock()
        executor.execute(plan, group, context)
        written = records.read(out)[before:] if out.is_file() else []
        costs.learn(group, clock() - began, written)

    # Tier 1: every cell's planned processes, each while it fits (without a
    # budget, all at once: a Slurm executor submits them as one job array).
    whole = [todo] if todo else []
    for group in schedule.groups(todo) if budget is not None else whole:
        fitting = costs.fitting(group, left())
        context.progress.advance(len(group) - len(fitting))  # passed over
        if fitting:
            execute(fitting)
    # Tier 2: more processes where they narrow the answer most.
    while True:
        extra = schedule.narrowing(
            plan, records.read(out) if out.is_file() else [], costs, left()
        )
        if not extra:
            break
        plan = plan.model_copy(update={"units": (*plan.units, *extra)})
        write_plan(plan, plan_path)
        context.progress.add(len(extra))
        execute(extra)
    closing = Closing(
        budget_s=budget,
        spent_s=round(clock() - started, 3),
        stops=schedule.stops(plan, records.read(out) if out.is_file() else []),
    )
    write_plan(plan.model_copy(update={"closing": closing}), plan_path)
    print(schedule.closing_line(closing), file=sys.stderr)
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
        measuring = Measuring.of(
            plan, context.results_dir, context.out, _host(context.results_dir, plan)
        )
        workers = _Workers(measuring.profile)
        try:
            for unit in units:
                with kept_off(of_profile(measuring.profile, unit.threads)):
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
    plan = read_plan(plan_path, follow=True)  # the plan the user named
    if not 0 <= index < len(plan.units):
        raise ValueError(
            f"{plan_path} has units 0 to {len(plan.units) - 1}, not {index}"
        )
    unit = plan.units[index]
    _writable_folder(results_dir)
    out = results_dir / f"run-{plan.run_id}.jsonl"
    measuring = Measuring.of(plan, results_dir, out, _host(results_dir, plan))
    verdicts = _unit_verdicts(unit, results_dir)
    standing = pairing.standings(records.read(out)) if out.is_file() else {}
    workers = _Workers(measuring.profile)
    try:
        with kept_off(of_profile(measuring.profile, unit.threads)):
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


def run_references(out: Path, results_dir: Path) -> dict[str, str]:
    """Per model of the run whose records are ``out``, what the gate found
    wrong with the float64 reference its verdicts rest on
    (``harness.core.gate.wrong_references``), under the verdict keys the
    run's plan names; empty when every reference was sound, or the plan is
    not in ``results_dir`` or cannot be read."""
    try:
        plan = read_plan(plan_file(results_dir, out.stem.removeprefix("run-")))
    except (OSError, ValueError):
        return {}
    keys: dict[str, set[str | None]] = {}
    for unit in plan.units:
        keys.setdefault(unit.model, set()).update(unit.verdict_keys.values())
    return wrong_references(results_dir, keys)


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
            where = of_profile(self.profile, unit.threads)
            self.worker = Worker(
                path, env=where.env, partner=partner, cpus=where.worker_cpus
            )
            self.serving = key
        return self.worker

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close(kill=True)
            self.worker = None


def _gone(worker: Worker) -> bool:
    """Whether ``worker`` started, then crashed or was killed at a timeout,
    and so must be replaced before the next cell.  A worker that never
    started (its framework missing, a hang at start-up) stays failed for this
    path and repeat: a new one would fail the same way, after another wait."""
    return worker.failure is not None and worker.started


def _host(results_dir: Path, plan: Plan) -> dict[str, Any]:
    """The machine's platform as every record of the run holds it, with its
    matmul peak."""
    host = records.host_platform()
    host["matmul_peak"] = matmul_peak(results_dir, plan)
    host["matmul_peak_flops"] = host["matmul_peak"]["flops_per_s"]
    return host


def matmul_peak(results_dir: Path, plan: Plan) -> dict[str, Any]:
    """This machine's float32 matmul peak for ``plan``'s run: the best of
    NumPy's and, unless the profile's ``peak_frameworks`` is off, of each
    framework's the run measures, timed as its workers run (their threads
    and CPUs), each repeat the profile's ``peak_s`` long
    (``harness.core.peak``).  Measured once per run and machine (kept in
    ``<results>/cache``), so the units of a run that another process or node
    runs share the figure of their machine."""
    host = files.file_name(records.host_platform()["hostname"])
    cache = results_dir / "cache"
    kept = files.inside(cache, f"peak-{plan.run_id}-{host}.json", "a peak's name")
    try:
        found = files.read_object(kept, PEAK_BYTES)
        if validated.fits(_KeptPeak, found):
            return found
        print(
            f"warning: {kept} is not a matmul peak this code keeps (a damaged "
            "or edited cache file); measured again",
            file=sys.stderr,
        )
    except FileNotFoundError:
        pass
    except OSError as exc:  # files.Refused: a link, a FIFO, not JSON ...
        print(f"warning: {exc}; the matmul peak is measured again", file=sys.stderr)
    profile = plan.get_profile()
    used = {get_path(p).framework for p in plan.paths}
    frameworks = [f for f in FRAMEWORKS if f in used] if profile.peak_frameworks else []
    where = of_profile(profile)
    print(
        "measuring this machine's float32 matmul peak: "
        + ", ".join(["numpy", *frameworks])
        + " ...",
        file=sys.stderr,
    )
    peak = dict(
        measure_matmul_peak(
            seconds=profile.peak_s,
            frameworks=frameworks,
            threads_env=where.env,
            cpus=where.worker_cpus,
            log=lambda line: print(line, file=sys.stderr),
        )
    )
    if validated.fits(_KeptPeak, peak):  # a peak no source gave is not kept
        files.folder(cache)
        files.write_json(kept, peak)
    return peak


class _KeptPeak(validated.Schema):
    """What a kept matmul peak must hold to be used again: a figure and the
    sources the report names (``harness.report.summary``)."""

    flops_per_s: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    sources: dict[str, dict[str, Any]]
