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
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from equivalence.operators import (
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
from harness.core.progress import Progress
from harness.core.resources import resource_summary
from workers.frameworks import FRAMEWORKS as REGISTERED
from workers.launch import Reply, Worker, thread_environment
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
                models=("ffn", "lenet", "lstm"),
            ),
            processes=1,
            examples=3,
            window_s=0.02,
            min_blocks=3,
            peak_size=1024,
        ),
        # square GEMMs to 2048 (4096 is in `large`), the models at batch 32
        OpsProfile("default", Sweep(gemm=(64, 128, 256, 512, 1024, 2048))),
        OpsProfile(
            "large",
            Sweep(model_batch=128, batches=(1, 16, 256, 4096)),
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
    threads: dict[str, Any] | None = None,
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
    out = results_dir / f"ops-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=False)
    threads_env = thread_environment(threads or {})
    peak = measure_matmul_peak()
    log(f"matmul peak (NumPy's BLAS, float32): {peak['flops_per_s'] / 1e9:.1f} GFLOP/s")
    run = _Run(profile, out, cases, peak, threads_env, fault, log)
    run.progress.add(
        profile.processes * len(frameworks) * sum(len(directions(c)) for c in cases)
    )
    run.line(
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
    """One ``ops`` run: its files, its float64 references, its verdicts."""

    def __init__(  # noqa: PLR0917 (the run's parts, each named once)
        self,
        profile: OpsProfile,
        out: Path,
        cases: list[Case],
        peak: Any,
        threads: dict[str, Any],
        fault: str | None,
        log: Log,
    ) -> None:
        self.profile, self.out, self.cases, self.peak = profile, out, cases, peak
        self.threads, self.fault, self.log = threads, fault, log
        self.verdicts: dict[tuple[str, str], Verdict] = {}
        self.references: dict[tuple[str, tuple[int, ...]], Any] = {}
        self.host = records.host_platform()
        self.platforms: dict[str, dict[str, Any]] = {}  # the current worker's
        self.busy = _Trailing()
        # units: cases times directions times frameworks times processes
        self.progress = Progress()

    def line(self, line: dict[str, Any]) -> None:
        jsonl.append(self.out / "gate.jsonl", line)

    def framework(self, framework: str, repeat: int) -> None:
        paths = operator_paths(framework)
        with Worker(paths[0], env=self.threads["env"], partner=paths[1:]) as worker:
            if not worker.started:
                assert worker.failure is not None
                self.log(f"ops {framework}: unavailable ({worker.failure.error})")
                for case in self.cases:
                    for direction in directions(case):
                        for path in paths:
                            self._record(
                                case,
                                direction,
                                path,
                                repeat,
                                "unavailable",
                                error=worker.failure.error,
                            )
                        self.progress.advance()
                return
            platforms = [worker.platform, *worker.partner_platforms]
            if not worker.partner_platforms and worker.partner_platform:
                platforms.append(worker.partner_platform)
            self.platforms = dict(zip(paths, platforms, strict=False))
            self._peak(worker, paths[-1], repeat)
            if repeat == 0:
                self._search(worker, framework, paths)
            for case in self.cases:
                for direction in directions(case):
                    self._measure(worker, case, direction, paths, repeat)
                    self.progress.advance()

    def _peak(self, worker: Worker, path: str, repeat: int) -> None:
        """The framework's own GEMM rate, every call's result read back: with
        NumPy's, the ceiling every operator is measured against
        (``harness.ops.report``)."""
        reply = self._call(worker, OpPeak(path=path, size=self.profile.peak_size))
        if not isinstance(reply.answer, OpPeakAnswer):
            self.log(f"ops peak {path}: {reply.status}: {reply.error}")
            return
        rates = reply.answer.flops_per_s
        self.line(
            {
                "kind": "peak",
                "path": path,
                "repeat": repeat,
                "size": self.profile.peak_size,
                "flops_per_s": rates,
                **resource_summary(reply.resources),
            }
        )
        self.log(f"ops peak {path}: {max(rates) / 1e9:.1f} GFLOP/s")

    def _search(self, worker: Worker, framework: str, paths: list[str]) -> None:
        operators = sorted({c.op for c in self.cases}, key=list(OPERATORS).index)
        with OpChecker(worker, fault=self.fault) as checker:
            for op in operators:
                for path in paths:
                    verdict = search(op, path, checker.evaluate, self.profile.examples)
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

    def _reference(self, case: Case) -> tuple[Any, Any, Any]:
        """The operands, float64 reference and float32 baseline of a timed
        case, computed once per run."""
        key = (case.op, case.dims)
        if key not in self.references:
            operands, cotangents = make_operands(case, SEED)
            self.references[key] = (
                (operands, cotangents),
                *reference(case, operands, cotangents),
            )
        return self.references[key]  # type: ignore[no-any-return]

    def _measure(
        self, worker: Worker, case: Case, direction: str, paths: list[str], repeat: int
    ) -> None:
        passing = []
        for path in paths:
            verdict = self.verdicts.get((case.op, path))
            if verdict is None or not verdict.ok:
                why = (
                    "no search"
                    if verdict is None
                    else f"the search found {verdict.why}"
                )
                self._record(case, direction, path, repeat, "not-timed", error=why)
            else:
                passing.append(path)
        if not passing:
            return
        (operands, cotangents), reference64, baseline = self._reference(case)
        with tempfile.TemporaryDirectory(prefix="ops-") as folder:
            file, out = Path(folder) / "operands.npz", Path(folder) / "out.npz"
            write_operands(file, operands, cotangents)
            prepared = self._call(
                worker,
                OpPrepare(
                    op=case.op,
                    dims=list(case.dims),
                    operands=str(file),
                    paths=passing,
                    direction=direction,
                    out=str(out),
                    fault=self.fault,
                ),
            )
            if not isinstance(prepared.answer, OpPreparedAnswer):
                for path in passing:
                    self._failed(case, direction, path, repeat, prepared)
                return
            arrays = load_npz(out)
        timed = []
        for path in passing:
            mine = {
                k.removeprefix(f"{path}/"): a
                for k, a in arrays.items()
                if k.startswith(f"{path}/")
            }
            result = judge_case(
                case, path, mine, reference64, baseline, direction=direction
            )
            if result.ok:
                timed.append(path)
            else:
                why = f"its timed closure disagrees: {describe_failure(result)}"
                self.log(f"ops {case.id} {direction} {path}: not timed, {why}")
                self._record(
                    case,
                    direction,
                    path,
                    repeat,
                    "not-timed",
                    equivalence="fail",
                    error=why,
                )
        if not timed:
            return
        if timed != passing:  # prepared again, the ones that passed alone
            self._measure(worker, case, direction, timed, repeat)
            return
        self._time(worker, case, direction, prepared.answer, repeat)

    def _time(
        self,
        worker: Worker,
        case: Case,
        direction: str,
        prepared: OpPreparedAnswer,
        repeat: int,
    ) -> None:
        p = self.profile
        reply = self._call(
            worker,
            OpTime(
                token=prepared.token,
                window_s=p.window_s,
                block_s=p.block_s,
                min_blocks=p.min_blocks,
                max_blocks=p.max_blocks,
                warmup_blocks=p.warmup_blocks,
                seed=SEED + repeat,
            ),
        )
        if not isinstance(reply.answer, OpTimeAnswer):
            for path in prepared.paths:
                self._failed(case, direction, path, repeat, reply)
            return
        answer = reply.answer
        shared = resource_summary(reply.resources)
        shared["contended"] = self.busy.add(reply.resources)
        for k, path in enumerate(answer.paths):
            blocks = [row[k] for row in answer.blocks_s]
            status = "ok" if answer.nonfinite[k] is None else "diverged"
            self._record(
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

    def _call(self, worker: Worker, request: OpPrepare | OpTime | OpPeak) -> Reply:
        return worker.call(request, self.profile.timeout_s)

    def _failed(
        self, case: Case, direction: str, path: str, repeat: int, reply: Reply
    ) -> None:
        status = "error" if reply.status == "error" else reply.status
        self.log(f"ops {case.id} {direction} {path}: {status}: {reply.error}")
        self._record(case, direction, path, repeat, status, error=reply.error)

    def _record(
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
        verdict = self.verdicts.get((case.op, path))
        records.append(
            self.out / "records.jsonl",
            records.make(
                self.out.name,
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
