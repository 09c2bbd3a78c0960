"""``python -m harness ops``: the models' operators, ``keras.ops`` against
each framework's own, equivalence first.

For every framework one worker process at a time serves its operator paths
(``keras-<b>`` and ``native-<b>``; MXNet has no Keras, so ``native-mxnet``
alone) and, in the first of the profile's ``processes``:

1. **searches** every operator on every path for a disagreement with the
   float64 reference (``equivalence.operators.search``: Hypothesis-drawn
   cases over shapes and value scales, the first disagreement shrunk to a
   minimal case); an operator a path gets wrong is never timed on it;
2. then, in every process, for every case of the profile's sweep
   (``zoo.operators.timed_cases``) and direction: **prepares** each passing
   path's timed closure, whose own results are judged against float64 at
   that very case (a closure that disagrees is not timed), and **times**
   the prepared closures in interleaved blocks (``workers.messages.OpTime``:
   the pairing of ``harness.stats.paired``, per call).

Everything lands in ``<results>/ops-<run id>/`` as it is measured:
``gate.jsonl`` (the run's header and every search verdict) and
``records.jsonl`` (one ``harness.core.records.Record`` per path, case, direction
and process: status, blocks, the worker's resources, whether the machine was
busy).  ``harness.ops.report`` then writes ``ops.md``, ``ops.json`` and one
log-log plot per operator; ``--render DIR`` redoes that from the files.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from equivalence.operators import (
    Arrays,
    OpChecker,
    Verdict,
    describe_failure,
    judge_case,
    reference,
    search,
    write_operands,
)
from harness.core import jsonl, records
from harness.core.peak import measure_matmul_peak
from harness.core.placement import Placement, kept_off, of_profile
from harness.core.profiles import get_profile
from harness.core.progress import Progress
from harness.core.resources import resource_summary
from workers.frameworks import FRAMEWORKS as REGISTERED
from workers.launch import Reply, Worker
from workers.messages import (
    OpPeak,
    OpPeakAnswer,
    OpPrepare,
    OpPreparedAnswer,
    OpTime,
    OpTimeAnswer,
)
from workers.paths import OPERATOR_PATHS, get_path
from workers.resources import contended
from zoo.arrays import load_npz
from zoo.operators import (
    DIRECTIONS,
    FAULTS,
    OPERATORS,
    Case,
    Sweep,
    make_operands,
    timed_cases,
)

FRAMEWORKS = tuple(REGISTERED)
SEED = 0  # the operands of every timed case
Log = Callable[[str], None]


@dataclass(frozen=True)
class OpsProfile:
    """How much ``harness ops`` measures.  ``examples``: cases the search
    draws per operator and path; a block fills about ``block_s`` seconds on
    the slowest path; blocks go on until ``window_s`` and ``min_blocks``
    (or ``max_blocks``); ``processes`` fresh worker processes per framework."""

    name: str
    sweep: Sweep = field(default_factory=Sweep)
    processes: int = 2
    examples: int = 10
    window_s: float = 0.3
    block_s: float = 0.01
    min_blocks: int = 5
    max_blocks: int = 200
    warmup_blocks: int = 1
    timeout_s: float = 600.0
    peak_size: int = 4096  # the square GEMM each framework's peak is taken at


OPS_PROFILES = {
    p.name: p
    for p in (
        OpsProfile(
            "smoke",
            Sweep(
                gemm=(64, 256),
                elements=(64, 2**14),
                batches=(1,),
                model_batch=4,
                # the transformer at batch 4: every operator of its layers,
                # at its 128 tokens, for little time
                models=("ffn", "lenet", "lstm", "transformer"),
            ),
            processes=1,
            examples=3,
            window_s=0.02,
            min_blocks=3,
            peak_size=1024,
        ),
        # square GEMMs to 2048 (4096 is in `large`), the four models at batch
        # 32; the transformer's layers in `smoke` and `large` only: at batch
        # 32 they would add an estimated 3 to 4 minutes to this profile's 11
        # (eleven cases, five more operators searched; from a smoke run of
        # them), while GELU (over the element sweep) and the GRU cell (at the
        # LSTM's shapes) are timed here too
        OpsProfile("default", Sweep(gemm=(64, 128, 256, 512, 1024, 2048))),
        OpsProfile(
            "large",
            Sweep(
                model_batch=128,
                batches=(1, 16, 256, 4096),
                models=(*Sweep().models, "transformer"),
            ),
            processes=3,
            examples=25,
            window_s=1.0,
        ),
    )
}


def get_ops_profile(name: str) -> OpsProfile:
    if name not in OPS_PROFILES:
        raise ValueError(
            f"unknown ops profile {name!r}; known: {', '.join(OPS_PROFILES)}"
        )
    return OPS_PROFILES[name]


def operator_paths(framework: str) -> list[str]:
    """The operator paths of a framework, Keras first."""
    if framework not in FRAMEWORKS:
        raise ValueError(
            f"unknown framework {framework!r}; known: {', '.join(FRAMEWORKS)}"
        )
    found = [p for p in OPERATOR_PATHS if get_path(p).framework == framework]
    return sorted(found, key=lambda p: get_path(p).api != "keras")


def directions(case: Case) -> tuple[str, ...]:
    return DIRECTIONS if case.operator.has_backward else ("forward",)


def ops(
    profile: OpsProfile,
    *,
    frameworks: list[str],
    operators: list[str],
    results_dir: Path,
    where: Placement | None = None,
    fault: str | None = None,
    log: Log = lambda line: print(line, file=sys.stderr),
) -> Path:
    """Search, check and time every case; the run's folder.  ``fault``
    (``zoo.operators.FAULTS``) is injected into the native paths, to see
    the checks catch it."""
    if fault is not None and fault not in FAULTS:
        raise ValueError(
            f"unknown operator fault {fault!r}; known: {', '.join(FAULTS)}"
        )
    cases = timed_cases(profile.sweep, tuple(operators))
    if not cases:
        raise ValueError(f"the {profile.name} profile has no case of {operators}")
    out = jsonl.claim(results_dir, "ops")
    where = where or of_profile(get_profile("default"))
    threads_env = where.record()
    # NumPy's alone: each framework's own GEMM peak is taken in its workers
    # (``_peak``), and the report's ceiling is the best of them all.
    peak = measure_matmul_peak(log=log)
    if peak["flops_per_s"] is None:
        raise ValueError(
            f"no matmul peak on this machine: {peak['sources']['numpy']['reason']}"
        )
    run = _Run(profile, out, cases, peak=peak, where=where, fault=fault, log=log)
    run.progress.add(
        profile.processes * len(frameworks) * sum(len(directions(c)) for c in cases)
    )
    run.gate.line(
        {
            "kind": "run",
            "profile": asdict(profile),
            "operators": operators,
            "frameworks": frameworks,
            "fault": fault,
            "host": records.host_platform(),
            "matmul_peak": dict(peak),
            "threads": {k: v for k, v in threads_env.items() if k != "env"},
        }
    )
    for repeat in range(profile.processes):
        for framework in frameworks:
            run.framework(framework, repeat)
    from harness.ops import report

    report.render(out)
    return out


class _Trailing:
    """Whether the machine was busy around a timing request, judged over the
    trailing ``seconds`` of requests (this one included): the CPU counters
    tick every 10 ms, so another process' share over one short request (an
    operator's timing can take 50 ms) is mostly rounding."""

    def __init__(self, seconds: float = 1.0) -> None:
        self.seconds = seconds
        self._recent: list[tuple[float, float]] = []  # (others' CPU s, wall s)

    def add(self, resources: dict[str, Any]) -> bool:
        others, wall = resources.get("others_cpu"), resources.get("wall_s")
        if not isinstance(others, float) or not isinstance(wall, float):
            return bool(resource_summary(resources)["contended"])
        self._recent.append((others * wall, wall))
        while sum(w for _, w in self._recent[1:]) >= self.seconds:
            self._recent.pop(0)
        taken = sum(o for o, _ in self._recent)
        spent = sum(w for _, w in self._recent)
        return contended({"others_cpu": taken / spent if spent else 0.0})


class _Run:
    """One ``ops`` run's loop: for every process and framework one worker,
    its peak (``_peak``), in the first process its search (``_Gate``), then
    every case and direction prepared, judged and timed.  The parts it uses:
    ``gate`` (the verdicts and ``gate.jsonl``), ``references`` (float64, once
    per case) and ``records`` (``records.jsonl``)."""

    def __init__(
        self,
        profile: OpsProfile,
        out: Path,
        cases: list[Case],
        *,
        peak: Any,
        where: Placement,
        fault: str | None,
        log: Log,
    ) -> None:
        self.profile, self.cases = profile, cases
        self.where, self.fault, self.log = where, fault, log
        self.operators = sorted({c.op for c in cases}, key=list(OPERATORS).index)
        self.gate = _Gate(out, profile.examples, fault, log)
        self.references = _References()
        self.records = _RecordWriter(
            out,
            profile,
            peak=peak,
            threads=where.record(),
            fault=fault,
            verdict=self.gate.verdict,
            log=log,
        )
        self.busy = _Trailing()
        # units: cases times directions times frameworks times processes
        self.progress = Progress()

    def framework(self, framework: str, repeat: int) -> None:
        """One worker process serving every operator path of ``framework``."""
        paths = operator_paths(framework)
        with (
            kept_off(self.where),
            Worker(
                paths[0],
                env=self.where.env,
                partner=paths[1:],
                cpus=self.where.worker_cpus,
            ) as worker,
        ):
            if not worker.started:
                assert worker.failure is not None
                self.log(f"ops {framework}: unavailable ({worker.failure.error})")
                self._unavailable(paths, repeat, worker.failure.error)
                return
            platforms = [worker.platform, *worker.partner_platforms]
            if not worker.partner_platforms and worker.partner_platform:
                platforms.append(worker.partner_platform)
            self.records.platforms = dict(zip(paths, platforms, strict=False))
            _peak(worker, paths[-1], repeat, self.profile, self.gate)
            if repeat == 0:
                self.gate.search(worker, self.operators, paths)
            for case in self.cases:
                for direction in directions(case):
                    self._measure(worker, case, direction, paths, repeat)
                    self.progress.advance()

    def _unavailable(self, paths: list[str], repeat: int, error: str | None) -> None:
        """Every case of a worker that did not start, recorded as such."""
        for case in self.cases:
            for direction in directions(case):
                for path in paths:
                    self.records.write(
                        case, direction, path, repeat, "unavailable", error=error
                    )
                self.progress.advance()

    def _measure(
        self, worker: Worker, case: Case, direction: str, paths: list[str], repeat: int
    ) -> None:
        """One case and direction: the paths the search passed are prepared,
        judged at this case, and those that agree timed together."""
        passing = self._searched(case, direction, paths, repeat)
        if not passing:
            return
        prepared, arrays = self._prepare(worker, case, direction, passing)
        if not isinstance(prepared.answer, OpPreparedAnswer):
            for path in passing:
                self.records.failed(case, direction, path, repeat, prepared)
            return
        timed = self._judge(case, direction, passing, arrays, repeat)
        if not timed:
            return
        if timed != passing:  # prepared again, the ones that passed alone
            self._measure(worker, case, direction, timed, repeat)
            return
        self._time(worker, case, direction, prepared.answer, repeat)

    def _searched(
        self, case: Case, direction: str, paths: list[str], repeat: int
    ) -> list[str]:
        """The paths whose search passed ``case``'s operator; the others are
        recorded not timed."""
        passing = []
        for path in paths:
            verdict = self.gate.verdict(case.op, path)
            if verdict is None or not verdict.ok:
                why = (
                    "no search"
                    if verdict is None
                    else f"the search found {verdict.why}"
                )
                self.records.write(
                    case, direction, path, repeat, "not-timed", error=why
                )
            else:
                passing.append(path)
        return passing

    def _prepare(
        self, worker: Worker, case: Case, direction: str, paths: list[str]
    ) -> tuple[Reply, Arrays]:
        """The worker builds the timed closures of ``paths`` at ``case`` and
        runs each once; the reply, and those first results read back for
        judging (none when the request failed)."""
        known = self.references.of(case)
        with tempfile.TemporaryDirectory(prefix="ops-") as folder:
            file, out = Path(folder) / "operands.npz", Path(folder) / "out.npz"
            write_operands(file, known.operands, known.cotangents)
            reply = worker.call(
                OpPrepare(
                    op=case.op,
                    dims=list(case.dims),
                    operands=str(file),
                    paths=paths,
                    direction=direction,
                    out=str(out),
                    fault=self.fault,
                ),
                self.profile.timeout_s,
            )
            prepared = isinstance(reply.answer, OpPreparedAnswer)
            return reply, load_npz(out) if prepared else {}

    def _judge(
        self, case: Case, direction: str, paths: list[str], arrays: Arrays, repeat: int
    ) -> list[str]:
        """The paths whose prepared closure agrees with float64 at ``case``;
        the others are logged and recorded not timed."""
        known = self.references.of(case)
        agreeing = []
        for path in paths:
            mine = {
                k.removeprefix(f"{path}/"): a
                for k, a in arrays.items()
                if k.startswith(f"{path}/")
            }
            result = judge_case(
                case, path, mine, known.float64, known.baseline, direction=direction
            )
            if result.ok:
                agreeing.append(path)
            else:
                why = f"its timed closure disagrees: {describe_failure(result)}"
                self.log(f"ops {case.id} {direction} {path}: not timed, {why}")
                self.records.write(
                    case,
                    direction,
                    path,
                    repeat,
                    "not-timed",
                    equivalence="fail",
                    error=why,
                )
        return agreeing

    def _time(
        self,
        worker: Worker,
        case: Case,
        direction: str,
        prepared: OpPreparedAnswer,
        repeat: int,
    ) -> None:
        """The prepared closures timed in interleaved blocks, one record per
        path and one log line for them all."""
        p = self.profile
        reply = worker.call(
            OpTime(
                token=prepared.token,
                window_s=p.window_s,
                block_s=p.block_s,
                min_blocks=p.min_blocks,
                max_blocks=p.max_blocks,
                warmup_blocks=p.warmup_blocks,
                seed=SEED + repeat,
            ),
            p.timeout_s,
        )
        if not isinstance(reply.answer, OpTimeAnswer):
            for path in prepared.paths:
                self.records.failed(case, direction, path, repeat, reply)
            return
        answer = reply.answer
        shared = resource_summary(reply.resources)
        shared["contended"] = self.busy.add(reply.resources)
        for k, path in enumerate(answer.paths):
            blocks = [row[k] for row in answer.blocks_s]
            status = "ok" if answer.nonfinite[k] is None else "diverged"
            self.records.write(
                case,
                direction,
                path,
                repeat,
                status,
                equivalence="pass",
                error=answer.nonfinite[k],
                values={
                    "block_s": blocks,
                    "orders": answer.orders,
                    "first_s": prepared.first_s[k],
                    "calls_per_block": answer.calls_per_block,
                    "partners": answer.paths,
                },
                summary={
                    "median_call_s": sorted(blocks)[len(blocks) // 2],
                    "flops": case.operator.call_flops(case.named, direction),
                    "elements": case.operator.elements(case.named),
                    **shared,
                },
            )
        busy = " BUSY MACHINE" if shared["contended"] else ""
        self.log(
            f"{self.progress.line(self.progress.done + 1)} ops {case.id} {direction} "
            f"{', '.join(answer.paths)}: "
            + ", ".join(
                f"{sorted(row)[len(row) // 2] * 1e6:.1f} us"
                for row in zip(*answer.blocks_s, strict=True)
            )
            + busy
        )


class _Gate:
    """The search gate: before anything is timed, every operator on every
    path is searched for a disagreement with float64, and only the verdicts
    that pass let a path be timed.  The verdicts are kept by (operator,
    path); they, the run's header and each framework's peak are the lines of
    ``gate.jsonl``."""

    def __init__(self, out: Path, examples: int, fault: str | None, log: Log) -> None:
        self.file = out / "gate.jsonl"
        self.examples, self.fault, self.log = examples, fault, log
        self.verdicts: dict[tuple[str, str], Verdict] = {}

    def line(self, line: dict[str, Any]) -> None:
        """One line of ``gate.jsonl``."""
        jsonl.append(self.file, line)

    def verdict(self, op: str, path: str) -> Verdict | None:
        """``op``'s verdict on ``path``; None where it was never searched."""
        return self.verdicts.get((op, path))

    def search(self, worker: Worker, operators: list[str], paths: list[str]) -> None:
        """Every operator on every path of ``worker``, each verdict kept,
        written and logged."""
        with OpChecker(worker, fault=self.fault) as checker:
            for op in operators:
                for path in paths:
                    verdict = search(op, path, checker.evaluate, self.examples)
                    self.verdicts[(op, path)] = verdict
                    self.line({"kind": "gate", **asdict(verdict)})
                    where = (
                        ""
                        if verdict.ok
                        else f": {verdict.counterexample}: {verdict.why}"
                    )
                    self.log(
                        f"ops search {op} {path}: {verdict.verdict} "
                        f"({verdict.examples} cases){where}"
                    )


def _peak(
    worker: Worker, path: str, repeat: int, profile: OpsProfile, gate: _Gate
) -> None:
    """The framework's own GEMM rate, every call's result read back, as a line
    of ``gate.jsonl``: with NumPy's, the ceiling every operator is measured
    against (``harness.ops.report``)."""
    reply = worker.call(OpPeak(path=path, size=profile.peak_size), profile.timeout_s)
    if not isinstance(reply.answer, OpPeakAnswer):
        gate.log(f"ops peak {path}: {reply.status}: {reply.error}")
        return
    rates = reply.answer.flops_per_s
    gate.line(
        {
            "kind": "peak",
            "path": path,
            "repeat": repeat,
            "size": profile.peak_size,
            "flops_per_s": rates,
            **resource_summary(reply.resources),
        }
    )
    gate.log(f"ops peak {path}: {max(rates) / 1e9:.1f} GFLOP/s")


class _Reference(NamedTuple):
    """A timed case's operands (drawn from ``SEED``) and what its results are
    judged against: float64 and NumPy's own float32."""

    operands: Arrays
    cotangents: Arrays
    float64: Arrays
    baseline: Arrays


class _References:
    """Every timed case's reference, computed once per run (by operator and
    dims) and reused by every later process and direction."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, tuple[int, ...]], _Reference] = {}

    def of(self, case: Case) -> _Reference:
        key = (case.op, case.dims)
        if key not in self._known:
            operands, cotangents = make_operands(case, SEED)
            self._known[key] = _Reference(
                operands, cotangents, *reference(case, operands, cotangents)
            )
        return self._known[key]


class _RecordWriter:
    """Writes ``records.jsonl``: one record per path, case, direction and
    process, each with the host, the current worker's platform (set per
    worker: ``platforms``, by path), the threads, NumPy's peak, the fault,
    and the path's search verdict where nothing else judged it."""

    def __init__(
        self,
        out: Path,
        profile: OpsProfile,
        *,
        peak: Any,
        threads: dict[str, Any],
        fault: str | None,
        verdict: Callable[[str, str], Verdict | None],
        log: Log,
    ) -> None:
        self.file, self.run_id = out / "records.jsonl", out.name
        self.profile, self.peak, self.threads = profile, peak, threads
        self.fault, self.verdict, self.log = fault, verdict, log
        self.host = records.host_platform()
        # the last started worker's, by path (kept when a worker does not start)
        self.platforms: dict[str, dict[str, Any]] = {}

    def failed(
        self, case: Case, direction: str, path: str, repeat: int, reply: Reply
    ) -> None:
        """A request that failed (error, crash, timeout...): logged, recorded."""
        self.log(f"ops {case.id} {direction} {path}: {reply.status}: {reply.error}")
        self.write(case, direction, path, repeat, reply.status, error=reply.error)

    def write(
        self,
        case: Case,
        direction: str,
        path: str,
        repeat: int,
        status: str,
        *,
        equivalence: str | None = None,
        error: str | None = None,
        values: dict[str, Any] | None = None,
        summary: dict[str, Any] | None = None,
    ) -> None:
        verdict = self.verdict(case.op, path)
        records.append(
            self.file,
            records.make(
                self.run_id,
                f"ops-{self.profile.name}",
                model=case.op,
                path=path,
                phase=direction,
                status=status,
                batch_size=case.dims[0],
                equivalence=equivalence
                or (verdict.verdict if verdict else "unavailable"),
                verified=status == "ok",
                repeat=repeat,
                values=values or {},
                summary=summary or {},
                settings={
                    "case": case.label,
                    "dims": case.named,
                    "window_s": self.profile.window_s,
                    "block_s": self.profile.block_s,
                    "min_blocks": self.profile.min_blocks,
                    "fault": self.fault,
                },
                host=self.host,
                platform={
                    **self.platforms.get(path, {}),
                    "matmul_peak_flops": self.peak["flops_per_s"],
                    "threads": {k: v for k, v in self.threads.items() if k != "env"},
                },
                error=error,
            ),
        )
