"""How one unit of a run is measured: the request a worker gets, the
record each cell's repeat leaves, and the console line that says so
(``harness.bench.run`` loops over the units and owns the workers).

A unit is one cell, or one Keras/native pair cell whose process alternates
timed blocks of both sides (``harness.core.pairing``).  Each request names
the content digests of the weights and batches the gate vouches for, so a
worker refuses other arrays; a run whose answer holds NaN or inf
(``nonfinite``) is recorded as ``diverged``, never ``ok``.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from harness.core import pairing, records
from harness.core.cells import Cell, Plan, Unit
from harness.core.flops import step_flops
from harness.core.gate import INFER_ONLY, checked_batches, checked_weights
from harness.core.placement import of_profile
from harness.core.profiles import Profile, Settings
from harness.core.records import verified
from harness.core.resources import resource_summary, usage_summary
from harness.core.seeds import WEIGHTS_SEED
from workers.launch import Reply, Worker
from workers.messages import Infer, Paired, PairedAnswer, Train, encode
from zoo.models import get_spec

LATENCY_SAMPLES = 10


class Workers(Protocol):
    """Where a unit's worker comes from (``harness.bench.run``'s one worker
    alive at a time)."""

    def get(self, unit: Unit, path: str, partner: str | None = None) -> Worker: ...


def summarize(
    phase: str, values: dict[str, Any], resources: dict[str, Any], flops: int
) -> dict[str, Any]:
    """The figures a report reads: medians, latency percentiles, the work
    done per timed unit (``flops``: per step or per mini-batch, from the
    spec, ``harness.core.flops``), the process' CPU time, page faults and
    context switches per step or mini-batch (``usage_*``) and the worker's
    resource use."""
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
    summary |= usage_summary(values.get("usage"))
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
    def of(
        cls, plan: Plan, results_dir: Path, out: Path, host: dict[str, Any]
    ) -> Measuring:
        """``host``: the machine's platform, its matmul peak included."""
        return cls(plan, plan.get_profile(), out, results_dir / "cache", host)

    def unit(
        self,
        unit: Unit,
        workers: Workers,
        verdicts: dict[str, str],
        standing: dict[pairing.PairCell, pairing.Standing],
        label: str,
    ) -> None:
        """Measure ``unit`` (or write why it is not timed), printing a
        progress line per process."""
        timeable = {
            p: self.plan.allow_unverified or verified(verdicts[p], unit.phase)
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
        threads = of_profile(self.profile, cell.threads).record()
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
        """One process' timing of ``cell``: its record."""
        spec = get_spec(cell.model)
        settings = self.profile.settings(cell.model)
        weights, data = self._inputs(cell)
        request = _request(settings, cell.model, cell.phase, weights, data)
        reply = worker.call(request, self.profile.timeout_s)
        values = encode(reply.answer) if reply.answer is not None else {}
        status, error = _outcome(reply, getattr(reply.answer, "nonfinite", None))
        summary = {}
        if status == "ok":
            flops = step_flops(spec, cell.phase, cell.batch_size)
            summary = summarize(cell.phase, values, reply.resources, flops)
        return self._record(
            cell,
            repeat,
            status=status,
            equivalence=verdict,
            verified=verified(verdict, cell.phase),
            values=values,
            summary=summary,
            settings=_settings_used(request),
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
        cell = unit.pair_cell()
        request = self._pair_request(unit)
        reply = worker.call(request, self.profile.timeout_s)
        answer = reply.answer if isinstance(reply.answer, PairedAnswer) else None
        outcomes = {
            api: _outcome(reply, getattr(answer, f"{api}_nonfinite", None))
            for api in ("keras", "native")
        }
        both_ok = all(status == "ok" for status, _ in outcomes.values())
        reason, found = None, None
        if both_ok and answer:
            reason, found = _stand(standing, unit, answer, reply, self.profile)
        shared = resource_summary(reply.resources)
        values = pairing.sides(answer, cell) if answer else {}
        flops = step_flops(get_spec(cell.model), cell.phase, cell.batch_size)
        for api, path in (("keras", cell.keras), ("native", cell.native)):
            status, error = outcomes[api]
            summary = {}
            if status == "ok":
                side = pairing.summary(cell.phase, values[api])
                summary = {"flops": flops, **side, **shared, **_ratio(found, reason)}
            platform = worker.platform if api == "keras" else worker.partner_platform
            self._record(
                Cell(cell.model, path, cell.phase, cell.batch_size, cell.threads),
                unit.repeat,
                status=status,
                equivalence=verdicts[path],
                verified=verified(verdicts[path], cell.phase),
                values=values.get(api, {}),
                summary=summary,
                settings=_settings_used(request),
                platform=platform,
                error=error,
            )
        return _pair_line(outcomes, answer, found, reason, shared)

    def _pair_request(self, unit: Unit) -> Paired:
        """What the worker of a pair cell is asked: both sides' blocks,
        alternating, with the unit's seed drawing their order."""
        cell = unit.pair_cell()
        settings = self.profile.settings(cell.model)
        weights, data = self._inputs(cell)
        train = cell.phase == "train"
        return Paired(
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

    def _inputs(
        self, cell: Cell | pairing.PairCell
    ) -> tuple[tuple[Path, str], tuple[Path, str]]:
        """The weights and batches of ``cell``, each (file, content digest)."""
        spec = get_spec(cell.model)
        count = self.profile.settings(cell.model).batches(cell.phase)
        weights = self._checked(checked_weights, spec, WEIGHTS_SEED)
        data = self._checked(
            checked_batches, spec, self.profile.seed, cell.batch_size, count
        )
        return weights, data

    def _checked(
        self, check: Callable[..., tuple[Path, str]], *args: Any
    ) -> tuple[Path, str]:
        """``check(*args, cache)``: a data file and its digest, checked once
        per run (``harness.core.gate.checked_weights``/``checked_batches``)."""
        key = (check.__name__, *(getattr(a, "name", a) for a in args))
        if key not in self.checked:
            self.checked[key] = check(*args, self.cache)
        return self.checked[key]


def _settings_used(request: Train | Infer | Paired) -> dict[str, Any]:
    """A request's settings as a record keeps them (not its file names)."""
    return {
        k: v for k, v in encode(request).items() if k not in ("weights", "data", "task")
    }


def _outcome(reply: Reply, nonfinite: Any) -> tuple[str, str | None]:
    """A timing's status and error: the reply's, or ``diverged`` when the
    timed run left NaN or inf (``nonfinite`` names where)."""
    if reply.ok and nonfinite:
        return "diverged", f"not finite: {nonfinite}"
    return reply.status, reply.error


def _stand(
    standing: pairing.Standing,
    unit: Unit,
    answer: PairedAnswer,
    reply: Reply,
    profile: Profile,
) -> tuple[str | None, Any]:
    """Add one process' block pairs to the pair cell's ``standing`` and say
    whether it needs more processes: (why it stops or None, the ratio's
    estimate so far or None) (``harness.core.pairing.stop_reason``)."""
    standing.add(unit.repeat, answer.keras_s, answer.native_s)
    standing.spent_s += float(reply.resources.get("wall_s", 0.0))
    return pairing.stop_reason(standing, len(standing.repeats), profile, unit.model)


def _ratio(found: Any, reason: str | None) -> dict[str, Any]:
    """The overhead ratio's fields of a pair record's summary."""
    if found is None:
        return {}
    return {
        "ratio": found.ratio,
        "ratio_low": found.low,
        "ratio_high": found.high,
        "ratio_half_width": found.half_width,
        "ratio_processes": found.processes,
        "stopped": reason,
    }


def _pair_line(
    outcomes: dict[str, tuple[str, str | None]],
    answer: PairedAnswer | None,
    found: Any,
    reason: str | None,
    shared: dict[str, Any],
) -> str:
    """The console line of one pair process."""
    if any(status != "ok" for status, _ in outcomes.values()):
        (keras_status, keras_error), (native_status, native_error) = (
            outcomes["keras"],
            outcomes["native"],
        )
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
    if verdict == INFER_ONLY:
        return (
            "equivalence verdict 'infer-only': its training steps do not agree "
            "with float64 (its forward pass and gradients do); training not "
            "timed; pass --allow-unverified to time it anyway"
        )
    return (
        f"equivalence verdict {verdict!r}: not timed; pass --allow-unverified "
        "to time it anyway"
    )


def _describe(record: records.Record) -> str:
    if record.status != "ok":
        return f"{record.status.upper()}: {record.error}"
    mark = "" if record.verified else " (UNVERIFIED)"
    if record.summary.get("contended"):
        taken = record.summary.get("others_cpu", 0)
        mark += f", MACHINE BUSY ({taken:.2f} cores taken)"
    return _describe_times(record) + mark


def _describe_times(record: records.Record) -> str:
    s = record.summary
    if record.phase == "train":
        return (
            f"{s['median_step_s'] * 1e3:.2f} ms/step, "
            f"first step {s['first_step_s']:.2f} s"
        )
    return f"{s['batches_per_s']:.1f} batches/s"
