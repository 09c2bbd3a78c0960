"""``python -m harness count``: Keras' overhead as instructions, counted.

Wall time on a shared machine moves with load the guest cannot see;
instructions do not.  For every framework, one worker process per repeat
serves the Keras path and the native path (MXNet: its two native paths)
under callgrind (``valgrind --tool=callgrind --instr-atstart=no``), with
one intra-op thread and fixed hashing.  Imports, compilation and warm-up
run uninstrumented; then every counted block (the very closure, steps and
mini-batches the timing tasks time) is counted alone into a dump of its own
(``workers.counting``), read here (``harness.count.callgrind``) and
appended to ``<results>/count-<run id>/count.jsonl`` as it arrives, so an
interrupted run loses nothing.  Every path is gated first, as for timing.

valgrind's CPU has no AVX-512: where the host has it, the kernels run
their AVX2 versions under callgrind, so kernel instructions depend on the
host; the interpreter's, the frameworks' and the runtime's do not.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from harness.core import jsonl, records, validated
from harness.core.gate import checked_batches, checked_weights, verify
from harness.core.placement import of_profile
from harness.core.profiles import Profile
from harness.core.progress import Progress
from harness.core.seeds import WEIGHTS_SEED
from harness.core.validated import Count as Natural
from harness.core.validated import Finite
from harness.count import callgrind
from workers.launch import PROJECT_ROOT, Reply, Worker, usable_cpus
from workers.messages import CALLGRIND_LIBRARY_ENV as LIBRARY_ENV
from workers.messages import CALLGRIND_OUT_ENV as OUT_ENV
from workers.messages import Count, CountAnswer
from workers.paths import PATHS, get_path
from zoo import files
from zoo.models import get_spec

Log = Callable[[str], None]
SOURCE = PROJECT_ROOT / "workers" / "callgrind_requests.c"
# The most the client requests' C source may hold (it is a few kilobytes).
SOURCE_BYTES = 1024 * 1024
START_TIMEOUT_S = 1200.0  # imports under valgrind: TensorFlow takes minutes
# Functions kept per counted block: those with at least this share of its
# instructions, the most first, at most TOP_FUNCTIONS.
KEPT_SHARE = 1e-4
TOP_FUNCTIONS = 400
VALGRIND_OPTIONS = (
    "--tool=callgrind",
    "--instr-atstart=no",  # imports and compilation run uninstrumented
    "--dump-line=no",
    "--compress-strings=no",
)
# Fixed hashing: dict and set orders, and so the interpreter's work, repeat.
# No fastbins in glibc's malloc: with them, whichever block happens to ask
# for a large chunk pays for consolidating every small one freed before it
# (``malloc_consolidate``: +4% on one block of native PyTorch's inference).
COUNT_ENV = {"PYTHONHASHSEED": "0", "GLIBC_TUNABLES": "glibc.malloc.mxfast=0"}


def paths_of(framework: str) -> list[str]:
    """The paths one counting worker serves: the framework's Keras path
    first and its native path (MXNet: its native paths)."""
    found = [
        p
        for p in PATHS
        if get_path(p).framework == framework and not get_path(p).mode_path
    ]
    return sorted(found, key=lambda p: get_path(p).api != "keras")


def valgrind() -> str:
    """valgrind's executable; ValueError in one sentence where it is missing."""
    found = shutil.which("valgrind")
    if found is None:
        raise ValueError(
            "harness count needs valgrind, which is not installed: apt-get "
            "install valgrind (nox -s count installs it where it runs as root)"
        )
    return found


def build_requests(cache: Path) -> Path:
    """The shared library of callgrind's client requests, compiled once per
    source (``workers/callgrind_requests.c``) with the system's C compiler;
    ValueError in one sentence where it cannot be built."""
    source = files.read_bytes(SOURCE, SOURCE_BYTES)
    library = cache / f"callgrind-requests-{hashlib.sha256(source).hexdigest()[:12]}.so"
    if library.exists():
        return library
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise ValueError(
            "harness count builds valgrind's client requests with a C compiler, "
            "and none is installed: apt-get install gcc"
        )

    def build(partial: Path) -> None:
        built = subprocess.run(
            [compiler, "-O2", "-shared", "-fPIC", "-o", str(partial), str(SOURCE)],
            capture_output=True,
            text=True,
            check=False,
        )
        if built.returncode != 0:
            raise ValueError(
                f"cannot build valgrind's client requests ({SOURCE.name}): "
                f"{built.stderr.strip().splitlines()[-1:]}; is valgrind's header "
                "installed (apt-get install valgrind)?"
            )

    files.folder(cache)
    # built beside it and renamed over it: a process never loads half a library
    return files.write_with(library, build)


def batch_sizes(profile: Profile, model: str, phase: str) -> list[int]:
    """The batch sizes a model's phase is counted at: the profile's, as
    its timing uses them."""
    settings = profile.settings(model)
    batch = settings.batch_size or get_spec(model).workload.batch_size
    if phase == "infer" and settings.infer_batch_sizes:
        return list(settings.infer_batch_sizes)
    return [batch]


def count(
    profile: Profile,
    *,
    models: list[str],
    frameworks: list[str],
    phases: list[str],
    results_dir: Path,
    processes: int,
    blocks: int,
    extra: tuple[str, float] | None = None,
    allow_unverified: bool = False,
    jobs: int | None = None,
    log: Log = lambda line: print(line, file=sys.stderr),
) -> Path:
    """Count every cell in ``processes`` worker processes per framework,
    ``jobs`` of them at once (default: one per CPU this process may use:
    valgrind runs a process' threads one at a time, and a count does not
    move with the machine's load); the run's folder (its ``count.jsonl``).
    ``extra``: a path and a factor of extra work added to its counted
    blocks.

    Raises ValueError for what the user can fix (no valgrind, no C
    compiler, a setting of ``phases`` unset in the profile)."""
    profile.require(phases, models)
    served = {framework: paths_of(framework) for framework in frameworks}
    every = [p for paths in served.values() for p in paths]
    if extra and extra[0] not in every:
        raise ValueError(
            f"extra work goes to a counted path, not {extra[0]!r}; counted: "
            f"{', '.join(every)}"
        )
    program = valgrind()
    cache = results_dir / "cache"
    library = build_requests(cache)
    out = jsonl.claim(results_dir, "count")
    raw = out / "count.jsonl"
    lock = threading.Lock()

    def write(line: dict[str, Any]) -> None:
        with lock:  # jsonl's file lock is per process, not per thread
            jsonl.append(raw, line)

    where = of_profile(profile)
    write(
        {
            "kind": "host",
            "host": {**records.host_platform(), "threads": where.record()},
            "profile": profile.name,
            "valgrind": _version(program),
            "extra": list(extra) if extra else None,
        }
    )
    cells = [
        (model, phase, batch)
        for model in models
        for phase in phases
        for batch in batch_sizes(profile, model, phase)
    ]
    verdicts = verify(
        models,
        [p for paths in served.values() for p in paths],
        results_dir,
        weights_seed=WEIGHTS_SEED,
        log=log,
    )
    units = []
    for framework, paths in served.items():
        counted = []
        for model, phase, batch in cells:
            # an infer-only path (its training alone disagrees) counts inference
            failing = [
                f"{p} {verdicts[model][p]}"
                for p in paths
                if not records.verified(verdicts[model][p], phase)
                or verdicts[model][p] == "unavailable"
            ]
            if failing and not allow_unverified:
                why = f"{', '.join(failing)} in the equivalence gate"
                log(f"count {model} {framework} {phase} b{batch}: not counted: {why}")
                write(
                    {
                        "kind": "skipped",
                        "model": model,
                        "framework": framework,
                        "phase": phase,
                        "batch": batch,
                        "why": why,
                    }
                )
                continue
            counted.append((model, phase, batch, bool(failing)))
        units += [(framework, paths, repeat, counted) for repeat in range(processes)]
    progress = Progress(sum(len(unit[3]) for unit in units))
    env = {**where.env, **COUNT_ENV, LIBRARY_ENV: str(library)}
    inputs = _Inputs(profile, cache)  # made here; the threads only read them
    for model, phase, batch in cells:
        inputs.files(model, phase, batch)

    def run(unit: tuple[str, list[str], int, list[tuple[str, str, int, bool]]]) -> None:
        framework, paths, repeat, counted = unit
        process = _Process(
            framework=framework,
            paths=paths,
            repeat=repeat,
            env=env,
            program=program,
            timeout=profile.timeout_s,
            write=write,
            log=log,
        )
        # the extra work goes to the one process that serves its path
        mine = extra if extra and extra[0] in paths else None
        process.run(counted, inputs, blocks, mine, progress)

    with ThreadPoolExecutor(max_workers=jobs or usable_cpus()) as pool:
        list(pool.map(run, units))
    return out


class _Inputs:
    """The weights and batches of every counted cell, checked once."""

    def __init__(self, profile: Profile, cache: Path) -> None:
        self.profile, self.cache = profile, cache
        self._made: dict[tuple[str, str, int], dict[str, Any]] = {}

    def files(self, model: str, phase: str, batch: int) -> dict[str, Any]:
        """A request's model and file fields for one cell."""
        key = (model, phase, batch)
        if key not in self._made:
            spec = get_spec(model)
            weights = checked_weights(spec, WEIGHTS_SEED, self.cache)
            count = self.profile.settings(model).batches(phase)
            data = checked_batches(spec, self.profile.seed, batch, count, self.cache)
            self._made[key] = {
                "model": model,
                "weights": str(weights[0]),
                "weights_digest": weights[1],
                "data": str(data[0]),
                "data_digest": data[1],
            }
        return self._made[key]

    def request(
        self,
        cell: tuple[str, str, int],
        repeat: int,
        blocks: int,
        extra: tuple[str, float] | None,
    ) -> Count:
        """The count request of one cell in one process."""
        model, phase, batch = cell
        settings = self.profile.settings(model)
        train = phase == "train"
        return Count(
            **self.files(model, phase, batch),
            phase=phase,
            steps=settings.training().train_steps if train else 1,
            blocks=blocks,
            warmup_runs=max(
                1, settings.warmup_runs if train else settings.inference().warmup_rounds
            ),
            seed=zlib.crc32(f"{model} {phase} {batch} {repeat}".encode()),
            tag=f"{model}/{phase}/b{batch}/r{repeat}",
            extra_path=extra[0] if extra else None,
            extra_factor=extra[1] if extra else 1.0,
        )


def _version(program: str) -> str:
    done = subprocess.run(
        [program, "--version"], capture_output=True, text=True, check=False
    )
    return done.stdout.strip()


class _Process:
    """One worker process under callgrind: every cell of one framework."""

    def __init__(
        self,
        *,
        framework: str,
        paths: list[str],
        repeat: int,
        env: dict[str, str],
        program: str,
        timeout: float,
        write: Callable[[dict[str, Any]], None],
        log: Log,
    ) -> None:
        self.framework, self.paths, self.repeat = framework, paths, repeat
        self.env, self.program, self.timeout = env, program, timeout
        self.write, self.log = write, log

    def run(
        self,
        cells: list[tuple[str, str, int, bool]],
        inputs: _Inputs,
        blocks: int,
        extra: tuple[str, float] | None,
        progress: Progress,
    ) -> None:
        with tempfile.TemporaryDirectory(prefix="harness-count-") as folder:
            dumps = Path(folder) / "callgrind.out"
            wrapper = [
                self.program,
                *VALGRIND_OPTIONS,
                f"--callgrind-out-file={dumps}",
                f"--log-file={Path(folder) / 'valgrind.log'}",
            ]
            self.log(
                f"{progress.line()} count {self.framework} process "
                f"{self.repeat + 1}: starting {' + '.join(self.paths)} under callgrind"
            )
            with Worker(
                self.paths[0],
                start_timeout=START_TIMEOUT_S,
                env={**self.env, OUT_ENV: str(dumps)},
                partner=self.paths[1:],
                wrapper=wrapper,
            ) as worker:
                for model, phase, batch, unverified in cells:
                    request = inputs.request(
                        (model, phase, batch), self.repeat, blocks, extra
                    )
                    start = time.monotonic()
                    reply = worker.call(request, self.timeout)
                    where = {
                        "model": model,
                        "framework": self.framework,
                        "phase": phase,
                        "batch": batch,
                        "repeat": self.repeat,
                        # under callgrind: what a cell costs to count here
                        "seconds": round(time.monotonic() - start, 1),
                    }
                    why = self._record(reply, Path(folder), where, unverified)
                    for dump in Path(folder).glob("callgrind.out.*"):
                        dump.unlink()
                    progress.advance()
                    self.log(
                        f"{progress.line()} count {model} {self.framework} {phase} "
                        f"b{batch} process {self.repeat + 1}: {why}"
                    )

    def _record(
        self, reply: Reply, folder: Path, where: dict[str, Any], unverified: bool
    ) -> str:
        """Write what one request counted, or why it counted nothing; which."""
        answer = reply.answer
        bad = [n for n in getattr(answer, "nonfinite", []) if n]
        why = f"diverged: {bad[0]}" if bad else str(reply.error or reply.status)
        if isinstance(answer, CountAnswer) and not bad:
            try:
                found = lines(answer, folder, where, unverified)
            except ValueError as exc:  # a dump missing or torn
                why = str(exc)
            else:
                for line in found:
                    self.write(line)
                return "counted"
        self.write({"kind": "failure", **where, "why": why})
        return why


def lines(
    answer: CountAnswer, folder: Path, where: dict[str, Any], unverified: bool
) -> list[dict[str, Any]]:
    """The ``count.jsonl`` lines of one answer: one per counted block, its
    instructions less the counter's own (the median of the empty dumps),
    per group and for the functions with the most."""
    found = {}
    for file in folder.glob("callgrind.out.*"):
        dump = callgrind.read(file)
        found[dump.label] = dump
    missing = [
        label
        for label in [*answer.empty, *(x for row in answer.labels for x in row)]
        if label not in found
    ]
    if missing:
        raise ValueError(f"callgrind wrote no dump labelled {missing[0]!r}")
    empties = sorted(found[label].total for label in answer.empty)
    empty = empties[len(empties) // 2]
    out = []
    for block, row in enumerate(answer.labels):
        for k, label in enumerate(row):
            dump = found[label]
            top = [
                (name, n)
                for name, n in dump.grouped().most_common(TOP_FUNCTIONS)
                if n >= KEPT_SHARE * dump.total
            ]
            out.append(
                {
                    "kind": "block",
                    **where,
                    "path": answer.paths[k],
                    "block": block,
                    "per_block": answer.per_block,
                    "instructions": dump.total - empty,
                    "counter": empty,
                    "groups": dump.groups(),
                    "extra_loops": answer.loops[k],
                    "unverified": unverified,
                    "functions": [
                        [group, Path(obj).name, fn, n] for (group, obj, fn), n in top
                    ],
                }
            )
    return out


Counted = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class CountLine(validated.Schema):
    """What the analysis reads of a count run's line (:func:`count` writes
    them): the host, a cell skipped or failed, or a counted block."""

    kind: Literal["host", "skipped", "failure", "block"]
    host: dict[str, Any] | None = None
    profile: str | None = None
    model: str | None = None
    framework: str | None = None
    phase: str | None = None
    batch: Annotated[int, Field(ge=1)] | None = None
    why: str | None = None
    path: str | None = None
    repeat: Natural | None = None
    per_block: Annotated[int, Field(ge=1)] | None = None
    instructions: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    counter: Counted | None = None
    groups: dict[str, Counted] | None = None
    extra_loops: Natural | None = None
    unverified: bool | None = None
    functions: list[tuple[str, str, str, Finite]] | None = None

    @model_validator(mode="after")
    def _whole(self) -> CountLine:
        """Each kind with every field its readers use."""
        cell = (self.model, self.framework, self.phase, self.batch)
        need: tuple[Any, ...] = ()
        if self.kind == "host":
            need = (self.host,)
        elif self.kind in ("skipped", "failure"):
            need = (*cell, self.why)
        else:
            need = (*cell, self.path, self.repeat, self.per_block)
            need += (self.instructions, self.counter, self.groups)
            need += (self.extra_loops, self.unverified, self.functions)
        if any(value is None for value in need):
            raise ValueError(f"a {self.kind} line without a field it needs")
        if self.kind == "block":
            assert self.groups is not None
            assert self.instructions is not None
            if set(callgrind.GROUPS) - set(self.groups):
                raise ValueError("a block without every group's instructions")
            if self.groups["spin"] >= self.instructions:
                raise ValueError("a block of nothing but spinning")
        return self


def read(out: Path) -> list[dict[str, Any]]:
    """The lines of a count run that :class:`CountLine` takes (a torn last
    line, or a line of another shape, skipped and named on stderr).

    Raises ValueError when the run holds none."""
    return validated.objects(
        out / "count.jsonl", CountLine, ("a count line", "count lines")
    )


def latest(results_dir: Path) -> Path | None:
    """The newest count run under ``results_dir``."""
    runs = sorted(results_dir.glob("count-*/count.jsonl"))
    return runs[-1].parent if runs else None


def render(out: Path, results_dir: Path) -> str:
    """Analyse a count run, with the newest timing of its profile in
    ``results_dir`` beside it; write ``count.json`` and ``count.md`` into
    ``out``; the Markdown."""
    from harness.count import analysis

    found = analysis.cells(read(out))
    if not found["paths"] and not found["not_counted"]:
        raise ValueError(
            f"{out} holds no counted block and no cell it could not count: the "
            f"run ended before its first"
        )
    found["time"] = analysis.relate(found, _timing(results_dir, found))
    files.write_json(out / "count.json", found, indent=1)
    text = analysis.markdown(found)
    files.write_text(out / "count.md", text + "\n")
    return text


def _timing(results_dir: Path, found: dict[str, Any]) -> dict[Any, dict[str, float]]:
    """CPU and wall time per step of the newest ``harness run`` of the count
    run's profile in ``results_dir`` (``harness.report.analysis.
    cpu_per_step``), on this machine; empty where there is none."""
    from harness.report.analysis import cpu_per_step

    profile = found["host"].get("profile")
    machine = found["host"].get("host", {}).get("machine")
    for run in sorted(results_dir.glob("run-*.jsonl"), reverse=True):
        recs = [
            r
            for r in records.read(run)
            if r.profile == profile and r.platform.get("machine") == machine
        ]
        try:
            found_here = cpu_per_step(recs)
        except ValueError:  # records that refuse to pool: not this run's timing
            continue
        if found_here:
            return found_here
    return {}


def count_run(given: Path) -> Path | None:
    """The count run a path names (a ``count-*`` folder or its
    ``count.jsonl``), or None."""
    folder = given.parent if given.name == "count.jsonl" else given
    return folder if (folder / "count.jsonl").is_file() else None


def compare_runs(old: Path, new: Path) -> str:
    """``report --compare`` of two count runs, as Markdown."""
    from harness.count import analysis, compare

    rows = compare.compare(analysis.cells(read(old)), analysis.cells(read(new)))
    return compare.markdown(rows, old.name, new.name)
