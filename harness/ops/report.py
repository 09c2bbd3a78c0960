"""What an ``ops`` run measured: per-call times, keras.ops overhead, share
of the peak, and the search verdicts (``python -m harness ops``).

From a run folder's ``gate.jsonl`` and ``records.jsonl``
(``harness.ops.measure``):

- every path's time per call of every case and direction: the HL estimate
  of its blocks, pooled over processes, with the hierarchical-bootstrap
  95% interval (``harness.stats.paired.location``);
- its work rate: FLOP/s as a share of the run's measured matmul peak for the
  compute-bound operators (matmul, dense, conv2d, the LSTM cell), elements
  per second for the rest (memory-bound: FLOPs say little there); a share
  above 1 is flagged, since no operator beats the machine's dense rate
  unless its timed call did not wait for its work;
- per backend, keras.ops against the native operator, block by block in the
  same process: the difference per call (``location`` of the per-block
  differences) and the ratio (``harness.stats.paired.estimate``).

``render`` writes ``ops.json``, ``ops.md`` and one log-log plot per
operator (``harness.report.plots.op_curves``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator
from tabulate import tabulate

from harness.core import peak, records, validated
from harness.stats import paired
from workers.frameworks import keras_backends
from zoo import files
from zoo.operators import DIRECTIONS, OPERATORS, get_operator

BACKENDS = keras_backends()
SLOWER = 1.10  # keras.ops counts as slower when its ratio's interval is above this
# Bootstrap resamples per interval: an ops run has some 1,600 intervals, and
# 2,000 resamples each took 166 s to analyse (default profile).  With 1,000,
# an interval's ends moved between two seeds by a median 0.4% of its width
# and at most 14% (2,000: 0.2% and 6%), measured on that run.
RESAMPLES = 1000
# Cases where the native call takes this long or more count as large sizes.
LARGE_S = 1e-3
# A share of the peak above this is flagged: the peak is a measurement too,
# so a GEMM timed at its size may beat it by a few percent.
ABOVE_PEAK = 1.10


@dataclass(frozen=True)
class Row:
    """One path's time per call of one case and direction."""

    op: str
    case: str
    direction: str
    path: str
    status: str
    work: float  # FLOPs (compute-bound operators) or elements per call
    compute_bound: bool
    call_s: float | None = None
    low_s: float | None = None
    high_s: float | None = None
    rate: float | None = None  # FLOP/s or elements/s at call_s
    share_of_peak: float | None = None
    above_peak: bool = False
    contended: bool = False
    processes: int = 0
    blocks: int = 0
    why: str | None = None


@dataclass(frozen=True)
class Overhead:
    """keras.ops against the native operator on one backend, one case."""

    op: str
    case: str
    direction: str
    backend: str
    work: float
    extra_s: float  # keras minus native, per call
    extra_low_s: float
    extra_high_s: float
    ratio: float
    ratio_low: float
    ratio_high: float
    native_s: float  # the native operator's time per call


# A matmul rate a gate line may hold: finite, positive, at most
# ``peak.MAX_FLOPS_PER_S`` (a line outside is skipped and named).
Rate = peak.Rate


class _Named(validated.Schema):
    name: records.Name


class _Peak(validated.Schema):
    flops_per_s: Rate


class GateLine(validated.Schema):
    """What the report reads of a line of an ops run's ``gate.jsonl``: the
    run's header, a search verdict, or a framework's GEMM peak."""

    kind: Literal["run", "gate", "peak"]
    # run
    profile: _Named | None = None
    matmul_peak: _Peak | None = None
    host: dict[str, Any] | None = None
    fault: str | None = None
    # gate
    op: str | None = None
    path: str | None = None
    ok: bool | None = None
    examples: Annotated[int, Field(ge=0)] | None = None
    # peak
    flops_per_s: Annotated[list[Rate], Field(min_length=1)] | None = None

    @model_validator(mode="after")
    def _whole(self) -> GateLine:
        need = {
            "run": (self.profile, self.matmul_peak, self.host),
            "gate": (self.op, self.path, self.ok, self.examples),
            "peak": (self.path, self.flops_per_s),
        }[self.kind]
        if any(value is None for value in need):
            raise ValueError(f"a {self.kind} line without a field it needs")
        return self


def _gate_lines(out: Path) -> list[dict[str, Any]]:
    return validated.objects(
        out / "gate.jsonl", GateLine, ("an ops gate line", "ops gate lines")
    )


def read(
    out: Path,
) -> tuple[dict[str, Any], list[dict[str, Any]], list[records.Record]]:
    """The run header, the search verdicts and the records of a run folder
    (lines of another shape skipped and named: :class:`GateLine`)."""
    lines = _gate_lines(out)
    header = next((line for line in lines if line.get("kind") == "run"), None)
    if header is None:
        raise ValueError(f"{out} holds no ops run (no run line in gate.jsonl)")
    verdicts = [line for line in lines if line.get("kind") == "gate"]
    recs = (
        records.read(out / "records.jsonl") if (out / "records.jsonl").exists() else []
    )
    return header, verdicts, recs


def _peaks(out: Path) -> dict[str, float]:
    """Each framework's best GEMM rate with its results read back
    (``OpPeak``), by the path that ran it."""
    found: dict[str, float] = {}
    for entry in _gate_lines(out):
        if entry.get("kind") == "peak":
            best = max(entry["flops_per_s"])
            found[entry["path"]] = max(found.get(entry["path"], 0.0), best)
    return found


def _blocks(recs: list[records.Record]) -> list[list[float]]:
    return [list(r.values["block_s"]) for r in recs if r.status == "ok"]


def analyse(out: Path) -> dict[str, Any]:
    """Rows, overheads and verdicts of a run folder, JSON-ready."""
    header, verdicts, recs = read(out)
    numpy_peak = float(header["matmul_peak"]["flops_per_s"])
    peaks = _peaks(out)
    peak = max([numpy_peak, *peaks.values()])
    by_key: dict[tuple[str, str, str, str], list[records.Record]] = defaultdict(list)
    for r in recs:
        by_key[(r.model, r.settings["case"], r.phase, r.path)].append(r)
    rows = [_row(key, found, peak) for key, found in by_key.items()]
    overheads = []
    for (op, case, direction, path), found in by_key.items():
        if not path.startswith("keras-"):
            continue
        backend = path.removeprefix("keras-")
        native = by_key.get((op, case, direction, f"native-{backend}"), [])
        estimate = _overhead((op, case, direction, backend), found, native)
        if estimate is not None:
            overheads.append(estimate)
    return {
        "run": out.name,
        "profile": header["profile"]["name"],
        "fault": header.get("fault"),
        "matmul_peak_flops": peak,
        "peak_by": max(peaks, key=lambda p: peaks[p]) if peak > numpy_peak else "numpy",
        "numpy_peak_flops": numpy_peak,
        "framework_peaks": peaks,
        "host": header["host"],
        "verdicts": verdicts,
        "rows": [asdict(r) for r in rows],
        "overheads": [asdict(o) for o in overheads],
    }


def _row(
    key: tuple[str, str, str, str], found: list[records.Record], peak: float
) -> Row:
    op, case, direction, path = key
    operator = get_operator(op)
    base = Row(
        op=op,
        case=case,
        direction=direction,
        path=path,
        status="ok",
        work=_work(op, found[0].settings["dims"], direction),
        compute_bound=operator.compute_bound,
    )
    blocks = _blocks(found)
    location = paired.location(blocks, RESAMPLES) if blocks else None
    if location is None:
        failed = found[-1]
        return replace(base, status=failed.status, why=failed.error)
    rate = base.work / location.value
    share = rate / peak if operator.compute_bound else None
    return replace(
        base,
        call_s=location.value,
        low_s=location.low,
        high_s=location.high,
        rate=rate,
        share_of_peak=share,
        above_peak=share is not None
        and share > ABOVE_PEAK
        and not operator.nominal_flops,
        contended=any(r.summary.get("contended") for r in found if r.status == "ok"),
        processes=location.processes,
        blocks=location.blocks,
    )


def _work(op: str, dims: dict[str, int], direction: str) -> float:
    """FLOPs of one call of a compute-bound operator; elements otherwise."""
    operator = get_operator(op)
    if operator.compute_bound:
        return operator.call_flops(dims, direction)
    return float(operator.elements(dims))


def _overhead(
    key: tuple[str, str, str, str],
    keras: list[records.Record],
    native: list[records.Record],
) -> Overhead | None:
    """Block-by-block pairs of the two sides, process by process; ``key``:
    operator, case, direction and backend."""
    op, case, direction, backend = key
    native_by_repeat = {r.repeat: r for r in native if r.status == "ok"}
    pairs, differences = [], []
    for k in keras:
        n = native_by_repeat.get(k.repeat)
        if k.status != "ok" or n is None:
            continue
        both = list(zip(k.values["block_s"], n.values["block_s"], strict=True))
        pairs.append(both)
        differences.append([a - b for a, b in both])
    if not pairs:
        return None
    ratio = paired.estimate(pairs, RESAMPLES)
    extra = paired.location(differences, RESAMPLES)
    assert ratio is not None
    assert extra is not None
    return Overhead(
        op=op,
        case=case,
        direction=direction,
        backend=backend,
        work=_work(op, keras[0].settings["dims"], direction),
        extra_s=extra.value,
        extra_low_s=extra.low,
        extra_high_s=extra.high,
        ratio=ratio.ratio,
        ratio_low=ratio.low,
        ratio_high=ratio.high,
        native_s=paired.hodges_lehmann([b for p in pairs for _, b in p]),
    )


# --- Markdown --------------------------------------------------------------------


def _us(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    us = seconds * 1e6
    return f"{us:,.1f}" if us < 100 else f"{us:,.0f}"


def _call(row: dict[str, Any]) -> str:
    if row["status"] != "ok":
        return str(row["status"])
    text = f"{_us(row['call_s'])} [{_us(row['low_s'])}, {_us(row['high_s'])}]"
    if row["share_of_peak"] is not None:
        text += f" ({row['share_of_peak']:.0%})"
    if row["above_peak"]:
        text += " ABOVE PEAK"
    if row["contended"]:
        text += " busy"
    return text


def _smallest(overheads: list[dict[str, Any]], op: str) -> list[dict[str, Any]]:
    """The overheads of ``op``'s smallest case, per backend and direction."""
    mine = [o for o in overheads if o["op"] == op]
    if not mine:
        return []
    least = min(o["work"] for o in mine)
    return sorted(
        (o for o in mine if o["work"] == least),
        key=lambda o: (BACKENDS.index(o["backend"]), o["direction"]),
    )


def markdown(analysis: dict[str, Any], *, every_operator: bool = True) -> str:
    """The run as Markdown: verdicts, the headline figures, and (unless
    ``every_operator`` is false, as in ``harness report``) a table for every
    operator."""
    rows, overheads = analysis["rows"], analysis["overheads"]
    peak = analysis["matmul_peak_flops"]
    by = analysis.get("peak_by", "numpy")
    source = "NumPy's BLAS" if by == "numpy" else f"{by}'s own GEMM, results read back"
    others = ", ".join(
        f"{p} {f / 1e9:.0f}"
        for p, f in sorted(analysis.get("framework_peaks", {}).items())
    )
    lines = [
        f"## Operators ({analysis['run']}, profile {analysis['profile']})",
        "",
        f"Matmul peak of this machine, float32: {peak / 1e9:.1f} GFLOP/s "
        f"({source}; NumPy's BLAS {analysis.get('numpy_peak_flops', peak) / 1e9:.0f}"
        + (f", {others}" if others else "")
        + ").  Times are µs per call with 95% intervals; (%) is the share of "
        "that peak for compute-bound operators; ABOVE PEAK marks a share above "
        f"{ABOVE_PEAK:.0%}, which only a timed call that did not wait for its "
        "work can reach.  A convolution's FLOPs are the direct algorithm's, "
        "and algorithms such as Winograd's do fewer multiplications, so its "
        "share can exceed 100% and is not flagged.",
    ]
    if analysis.get("fault"):
        lines += [
            "",
            f"**Deliberate fault injected into the native paths: "
            f"{analysis['fault']}.**",
        ]
    busy = sum(1 for r in rows if r["contended"])
    if busy:
        lines += [
            "",
            f"BUSY MACHINE: {busy} timings ran while other processes "
            "used the CPU (marked busy).",
        ]
    lines += ["", *_verdict_table(analysis["verdicts"])]
    lines += ["", "### Per-call overhead of keras.ops (smallest cases)", ""]
    head = []
    for op in ("matmul", "relu"):
        for o in _smallest(overheads, op):
            head.append(
                [
                    f"{op} {o['case']}",
                    o["direction"],
                    o["backend"],
                    f"{_us(o['extra_s'])} [{_us(o['extra_low_s'])}, "
                    f"{_us(o['extra_high_s'])}]",
                    f"{o['ratio']:.2f}x [{o['ratio_low']:.2f}, {o['ratio_high']:.2f}]",
                ]
            )
    lines.append(
        tabulate(
            head,
            headers=["case", "direction", "backend", "keras − native (µs)", "ratio"],
            tablefmt="github",
        )
        if head
        else "(no paired case)"
    )
    lines += ["", *_gemm_table(rows), "", *_slower(overheads), ""]
    if not every_operator:
        return "\n".join(lines)
    for op in OPERATORS:
        mine = [r for r in rows if r["op"] == op]
        if mine:
            lines += [*_operator_table(op, mine), ""]
    return "\n".join(lines)


def _verdict_table(verdicts: list[dict[str, Any]]) -> list[str]:
    if not verdicts:
        return ["(no search ran)"]
    failed = [v for v in verdicts if not v["ok"]]
    text = [
        f"Search against float64: {len(verdicts) - len(failed)} of {len(verdicts)} "
        f"operator × path pairs agree on every drawn case "
        f"({sum(v['examples'] for v in verdicts)} cases checked)."
    ]
    for v in failed:
        text.append(
            f"- **{v['op']} on {v['path']} disagrees** (not timed): "
            f"{v['counterexample']}: {v['why']}"
        )
    return text


def _gemm_table(rows: list[dict[str, Any]]) -> list[str]:
    gemm = [r for r in rows if r["op"] == "matmul" and r["status"] == "ok"]
    if not gemm:
        return []
    paths = sorted({r["path"] for r in gemm})
    cases = sorted(
        {r["case"] for r in gemm},
        key=lambda c: min(r["work"] for r in gemm if r["case"] == c),
    )
    table = []
    for direction in ("forward", "backward"):
        for case in cases:
            cells = {
                r["path"]: f"{r['share_of_peak']:.0%}"
                + (" ABOVE PEAK" if r["above_peak"] else "")
                for r in gemm
                if r["case"] == case and r["direction"] == direction
            }
            if cells:
                table.append([case, direction, *(cells.get(p, "—") for p in paths)])
    return [
        "### Square GEMM as a share of the matmul peak",
        "",
        tabulate(table, headers=["case", "direction", *paths], tablefmt="github"),
    ]


def _slower(overheads: list[dict[str, Any]]) -> list[str]:
    """Cases where the native call takes at least ``LARGE_S`` (so a per-call
    cost of microseconds cannot explain a gap) and keras.ops is slower beyond
    doubt (its ratio's interval above ``SLOWER``), the worst per operator,
    direction and backend."""
    worst: dict[tuple[str, str, str], dict[str, Any]] = {}
    for o in overheads:
        if o["native_s"] < LARGE_S or o["ratio_low"] <= SLOWER:
            continue
        key = (o["op"], o["direction"], o["backend"])
        if key not in worst or o["ratio"] > worst[key]["ratio"]:
            worst[key] = o
    text = [
        f"### Slower through keras.ops where the native call takes "
        f"{LARGE_S * 1e3:g} ms or more",
        "",
    ]
    if not worst:
        return [*text, f"None: no such case's ratio interval lies above {SLOWER:.2f}."]
    return [
        *text,
        *(
            f"- {o['op']} {o['case']} {o['direction']} on {o['backend']}: "
            f"{o['ratio']:.2f}x [{o['ratio_low']:.2f}, {o['ratio_high']:.2f}], "
            f"+{_us(o['extra_s'])} µs on {_us(o['native_s'])} µs per call"
            for o in sorted(worst.values(), key=lambda o: -o["ratio"])
        ),
    ]


def _operator_table(op: str, rows: list[dict[str, Any]]) -> list[str]:
    paths = sorted({r["path"] for r in rows}, key=lambda p: (p.split("-")[1], p))
    keys = sorted(
        {(r["case"], r["direction"], r["work"]) for r in rows},
        key=lambda k: (DIRECTIONS.index(k[1]), k[2]),
    )
    table = []
    for case, direction, _ in keys:
        cells = {
            r["path"]: _call(r)
            for r in rows
            if r["case"] == case and r["direction"] == direction
        }
        table.append([case, direction, *(cells.get(p, "—") for p in paths)])
    return [
        f"### {op}: {get_operator(op).summary}",
        "",
        tabulate(table, headers=["case", "direction", *paths], tablefmt="github"),
    ]


def render(out: Path) -> dict[str, Any]:
    """Analyse a run folder and write ``ops.json``, ``ops.md`` and the plots."""
    analysis = analyse(out)
    files.write_json(out / "ops.json", analysis, indent=1, default=_finite)
    files.write_text(out / "ops.md", markdown(analysis) + "\n")
    try:
        from harness.report.plots import op_curves
    except ImportError:  # matplotlib missing: the tables still stand
        return analysis
    op_curves(analysis["rows"], out)
    return analysis


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    raise TypeError(f"not JSON: {value!r}")


# --- reading an analysis back ---------------------------------------------------

# The largest ops.json read: an ops run of every operator writes a few MB.
ANALYSIS_BYTES = 64 * 1024 * 1024
# A time per call, FLOPs or elements per call, a ratio or share an analysis
# may hold: finite, and within what a CPU can do (a call of at most eleven
# days, 1e18 FLOPs, a ratio of a million), or the report prints no figure.
CallSeconds = Annotated[
    float, Field(ge=-records.MAX_STEP_S, le=records.MAX_STEP_S, allow_inf_nan=False)
]
Work = Annotated[float, Field(ge=0, le=1e18, allow_inf_nan=False)]
Factor = Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]
# A search's counterexample or reason, as the verdict table prints it.
Said = Annotated[str, Field(max_length=records.MAX_TEXT_CHARS)]


class _ShownRow(validated.Schema):
    op: records.Name
    case: records.Name
    direction: records.Name
    path: records.Name
    status: records.Name
    work: Work
    call_s: CallSeconds | None = None
    low_s: CallSeconds | None = None
    high_s: CallSeconds | None = None
    share_of_peak: Factor | None = None
    above_peak: bool = False
    contended: bool = False

    @model_validator(mode="after")
    def _timed(self) -> _ShownRow:
        if self.status == "ok" and None in (self.call_s, self.low_s, self.high_s):
            raise ValueError("a timed row without its time")
        return self


class _ShownOverhead(validated.Schema):
    op: records.Name
    case: records.Name
    direction: records.Name
    backend: records.Name
    work: Work
    extra_s: CallSeconds
    extra_low_s: CallSeconds
    extra_high_s: CallSeconds
    ratio: Factor
    ratio_low: Factor
    ratio_high: Factor
    native_s: CallSeconds

    @model_validator(mode="after")
    def _known(self) -> _ShownOverhead:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend {self.backend!r:.80} is none of {BACKENDS}")
        return self


class _ShownVerdict(validated.Schema):
    op: records.Name
    path: records.Name
    ok: bool
    examples: validated.Count
    counterexample: Said | None = None
    why: Said | None = None


class Analysis(validated.Schema):
    """What ``harness report`` and ``harness ops`` show of an ``ops.json``
    (:func:`markdown` without every operator's table, the exit status):
    each field of its type and within range, every name at most
    ``records.MAX_NAME_CHARS`` characters."""

    run: records.Name
    profile: records.Name
    fault: records.Name | None = None
    matmul_peak_flops: Rate
    peak_by: records.Name = "numpy"
    numpy_peak_flops: Rate | None = None
    framework_peaks: dict[records.Name, Rate] = Field(default_factory=dict)
    verdicts: list[_ShownVerdict]
    rows: list[_ShownRow]
    overheads: list[_ShownOverhead]


def load(out: Path) -> dict[str, Any]:
    """The analysis an ops run folder's ``ops.json`` holds, as written.

    Raises ValueError (``zoo.files.Refused`` included), in one sentence
    naming the file, for one that is no regular file, larger than
    ``ANALYSIS_BYTES``, no JSON or not what :class:`Analysis` asks; OSError
    when it cannot be read."""
    path = out / "ops.json"
    found = files.read_object(path, ANALYSIS_BYTES)
    if not validated.fits(Analysis, found):
        raise ValueError(
            f"{path} is not an ops analysis the report can show (a field "
            "missing, of another type or out of range); run 'python -m harness "
            f"ops --render {out}' to write it again"
        )
    return found


def latest(results_dir: Path) -> Path | None:
    """The newest ``ops-*`` folder with a run in it, if any."""
    runs = sorted(results_dir.glob("ops-*/gate.jsonl"))
    return runs[-1].parent if runs else None
