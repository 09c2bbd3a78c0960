"""What a run's report says first: the answer, its largest overheads
explained, the baseline's own standing and what to doubt (issue 46).

A reader of a benchmark asks, in this order: on what was it measured; what
does Keras cost over hand-written code on each framework; where are the
large costs and where does their time go; how good is the yardstick; and
which figures should I not trust.  :mod:`harness.report.tables` prints these
sections first and the detailed tables after them.

- **The answer** (:func:`spreads`, :func:`answer`, :func:`carried`): per
  framework, training and inference with each model at its training batch
  size, and inference (or training) at batch 1 where the run timed it (a
  single sample: the most common call).  What a reader carries away is the
  median and the range of the per-model ratios, "over these N models"; the
  geometric mean stands beside them, its interval the normal interval of
  the mean of the logarithms (each model's standard error from its own 95%
  interval: half its width in logs over 1.96), which says how well these
  models were measured, not how the overhead of other models would fall.  A
  ratio the gate did not verify, or one too uncertain to compare (wide), is
  left out of every figure and named with why (issue 64: a mean over five
  unlike models read as "Keras costs 2.2x").
- **Findings** (:func:`large`, :func:`findings`): every verified, not
  wide overhead of at least ``LARGE`` is counted; the ``FINDINGS`` largest
  are shown, each with where its time goes where ``harness explain`` or
  ``harness count`` measured that cell in the results folder, else the
  command that would (its paths as the reader types them).
- **The baseline** (:func:`baseline`): ``harness floors`` records of this
  machine time each native training step against its framework's
  idiomatic one; Keras over the idiomatic step is Keras over native times
  native over idiomatic.
- **Doubts** live in :mod:`harness.report.doubts`: one computation that
  the header counts and the Doubts section lists.

Every figure is computed from rows :mod:`harness.report.analysis` made or
from records and files checked on reading (a file of another shape is
passed over, never indexed unchecked).  Framework-free.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from harness.core import jsonl, peak, validated
from harness.core.cells import closing_of
from harness.core.machines import describe, name_of
from harness.core.records import Record, final, outcome, scan
from harness.report import doubts, literal
from harness.report import explain_runs as explain
from harness.stats import robust
from zoo import files

# The z of a two-sided 95% normal interval.
Z95 = statistics.NormalDist().inv_cdf(0.975)
# Overheads at least this large are findings, the largest first, at most
# FINDINGS of them.
LARGE = 1.5
FINDINGS = 5
# A part of a Keras step named in a finding: at least this share of it.
PART_SHARE = 0.10
# A native step slower than its framework's idiomatic one by more than this
# (``harness floors`` flags it; the report, below the runner, keeps it)
# makes Keras over native flatter than what a user of the framework sees.
SLOWER = 1.05


@dataclass(frozen=True)
class Ratio:
    """One Keras/native overhead: the ratio, its 95% interval and its marks
    (``unverified``, ``wide``, a busy mark)."""

    model: str
    framework: str
    phase: str
    batch: int
    value: float
    low: float
    high: float
    marks: tuple[str, ...]

    @property
    def verified(self) -> bool:
        return "unverified" not in self.marks

    def text(self) -> str:
        return f"{self.value:.2f} [{self.low:.2f}, {self.high:.2f}]"


def ratios(rows: Iterable[dict[str, Any]]) -> list[Ratio]:
    """The ratios of ``harness.report.analysis.overhead_rows`` that have an
    interval, in the rows' order."""
    out = []
    for row in rows:
        value, low, high = (
            row.get("overhead"),
            row.get("overhead_ci_low"),
            row.get("overhead_ci_high"),
        )
        if value is None or low is None or high is None or value <= 0 or low <= 0:
            continue
        marks = [m for m in (row.get("mark") or "").split(", ") if m]
        if row.get("busy"):
            marks.append(str(row["busy"]))
        out.append(
            Ratio(
                row["model"],
                row["framework"],
                row["phase"],
                row["batch_size"],
                float(value),
                float(low),
                float(high),
                tuple(marks),
            )
        )
    return out


def headline(found: Sequence[Ratio]) -> list[Ratio]:
    """One ratio per model, framework and phase: at the model's training
    batch size (inference too), or, for a model without training cells,
    its largest batch."""
    train = {r.model: r.batch for r in found if r.phase == "train"}
    largest: dict[str, int] = {}
    for r in found:
        largest[r.model] = max(largest.get(r.model, 0), r.batch)
    return [r for r in found if r.batch == train.get(r.model, largest[r.model])]


def geometric_mean(
    estimates: Sequence[tuple[float, float, float]],
) -> tuple[float, float, float]:
    """The geometric mean of (value, low, high) estimates and its 95%
    interval: the mean of the logarithms plus or minus 1.96 standard
    errors, each estimate's standard error half its interval's width in
    logarithms over 1.96 (so an asymmetric interval counts by its width).

    Raises ValueError for no estimate or one that is not positive."""
    if not estimates:
        raise ValueError("a geometric mean of no estimate")
    if any(min(e) <= 0 for e in estimates):
        raise ValueError("a geometric mean of ratios needs positive values")
    n = len(estimates)
    centre = sum(math.log(v) for v, _, _ in estimates) / n
    errors = [
        (math.log(high) - math.log(low)) / (2 * Z95) for _, low, high in estimates
    ]
    spread = math.sqrt(sum(e * e for e in errors)) / n
    return (
        math.exp(centre),
        math.exp(centre - Z95 * spread),
        math.exp(centre + Z95 * spread),
    )


@dataclass(frozen=True)
class Spread:
    """Keras over native for one framework, phase and batch (``batch``:
    ``None`` for each model's training batch, else that batch size, 1 for
    a single sample): the ratios read (``taken``: verified and not wide)
    and the models left out (``(model, why)``)."""

    framework: str
    phase: str
    batch: int | None
    taken: tuple[Ratio, ...]
    left_out: tuple[tuple[str, str], ...]

    @property
    def what(self) -> str:
        """The row's words: ``training``, ``inference``, ``inference, batch 1``."""
        phase = "training" if self.phase == "train" else "inference"
        return phase if self.batch is None else f"{phase}, batch {self.batch}"

    @property
    def ordered(self) -> list[Ratio]:
        return sorted(self.taken, key=lambda r: r.value)

    @property
    def median(self) -> float | None:
        return statistics.median(r.value for r in self.taken) if self.taken else None

    def range_text(self) -> str | None:
        """``1.04x (transformer) to 6.69x (lstm)``; one model alone by name."""
        ordered = self.ordered
        if not ordered:
            return None
        low, high = ordered[0], ordered[-1]
        if len(ordered) == 1:
            return f"{low.value:.2f}x ({low.model})"
        return f"{low.value:.2f}x ({low.model}) to {high.value:.2f}x ({high.model})"

    def mean_text(self) -> str | None:
        """The geometric mean and its 95% interval (of how well these models
        were measured, not of other models)."""
        if not self.taken:
            return None
        g, low, high = geometric_mean([(r.value, r.low, r.high) for r in self.taken])
        return f"{g:.2f}x [{low:.2f}, {high:.2f}]"

    def sentence(self) -> str:
        """What a reader carries away: the median and the range, over which
        models, and what was left out."""
        n = len(self.taken)
        if not n:
            said = "no ratio to read"
        elif n == 1:
            said = self.range_text() or ""
        else:
            said = (
                f"median {self.median:.2f}x over these {n} models, {self.range_text()}"
            )
        if self.left_out:
            said += f" ({len(self.left_out)} left out: see Doubts)"
        return f"{self.what} {said}"


# Why a ratio is left out of every summary figure.
UNVERIFIED = "unverified"
WIDE = "too uncertain"
HELD_BACK = "held back"
NO_RATIO = "no ratio"


@dataclass(frozen=True)
class Unrated:
    """A Keras/native pair of the run without a ratio: held back by the gate
    (a side's verdict is not ``pass``), or not timed to the end."""

    model: str
    framework: str
    phase: str
    batch: int
    why: str


def unrated(rows: Iterable[dict[str, Any]]) -> list[Unrated]:
    """The rows of ``harness.report.analysis.overhead_rows`` without a ratio."""
    out = []
    for row in rows:
        if row.get("overhead") is not None:
            continue
        verdicts = (row.get("keras_equivalence"), row.get("native_equivalence"))
        held = any(v is not None and v != "pass" for v in verdicts)
        out.append(
            Unrated(
                str(row["model"]),
                str(row["framework"]),
                str(row["phase"]),
                int(row["batch_size"]),
                HELD_BACK if held else NO_RATIO,
            )
        )
    return out


def spreads(found: Sequence[Ratio], missing: Sequence[Unrated] = ()) -> list[Spread]:
    """Per framework: training and inference at each model's training batch
    (``headline``), and every other batch of 1 (a single sample: the most
    common call, ``predict`` on one input); framework by framework,
    training first.  A pair of ``missing`` at those batches is left out by
    name (the transformer held back on TensorFlow is one of five models,
    not a model that was never there)."""
    chosen = headline(found)
    groups: dict[tuple[str, str, int | None], list[Ratio]] = {}
    for r in found:
        if r in chosen:
            groups.setdefault((r.framework, r.phase, None), []).append(r)
        elif r.batch == 1:
            groups.setdefault((r.framework, r.phase, 1), []).append(r)
    trained = {r.model: r.batch for r in chosen}
    trained |= {m.model: m.batch for m in missing if m.phase == "train"}
    absent: dict[tuple[str, str, int | None], list[tuple[str, str]]] = {}
    for m in missing:
        if m.batch == trained.get(m.model):
            key: tuple[str, str, int | None] = (m.framework, m.phase, None)
        elif m.batch == 1:
            key = (m.framework, m.phase, 1)
        else:
            continue
        absent.setdefault(key, []).append((m.model, m.why))
        groups.setdefault(key, [])
    out = []
    for (framework, phase, batch), members in sorted(
        groups.items(),
        key=lambda kv: (kv[0][0], kv[0][1] != "train", kv[0][2] is not None),
    ):
        taken = tuple(r for r in members if r.verified and "wide" not in r.marks)
        left = tuple(
            (r.model, UNVERIFIED if not r.verified else WIDE)
            for r in members
            if r not in taken
        ) + tuple(absent.get((framework, phase, batch), ()))
        out.append(Spread(framework, phase, batch, taken, left))
    return out


def answer(
    found: Sequence[Ratio], missing: Sequence[Unrated] = ()
) -> list[dict[str, Any]]:
    """The answer's table, one row per :func:`spreads`, its columns in a
    reader's words: how many models it reads, their median and range, the
    geometric mean beside them, and what was left out and why."""
    rows = []
    for s in spreads(found, missing):
        members = len(s.taken) + len(s.left_out)
        rows.append(
            {
                "framework": s.framework,
                "what": s.what,
                "models read": f"{len(s.taken)} of {members}",
                "median": None if s.median is None else f"{s.median:.2f}x",
                "lowest to highest": s.range_text(),
                "geometric mean [95% CI]": s.mean_text(),
                "left out": ", ".join(f"{model} ({why})" for model, why in s.left_out)
                or None,
            }
        )
    return rows


def carried(found: Sequence[Ratio], missing: Sequence[Unrated] = ()) -> list[str]:
    """One line per framework: what Keras costs there, as a reader carries
    it away (:meth:`Spread.sentence` of each of its rows)."""
    lines: dict[str, list[str]] = {}
    for s in spreads(found, missing):
        lines.setdefault(s.framework, []).append(s.sentence())
    return [f"{framework}: {'; '.join(said)}" for framework, said in lines.items()]


def per_model(found: Sequence[Ratio]) -> list[dict[str, Any]]:
    """One row per model: its headline ratio per framework and phase, with
    its marks."""
    out: dict[str, dict[str, Any]] = {}
    chosen = headline(found)
    columns = sorted(
        {(r.framework, r.phase) for r in chosen}, key=lambda k: (k[0], k[1] != "train")
    )
    for r in chosen:
        row = out.setdefault(
            r.model,
            {"model": r.model, "batch": r.batch}
            | {f"{f} {ph}": None for f, ph in columns},
        )
        mark = f" ({', '.join(r.marks)})" if r.marks else ""
        row[f"{r.framework} {r.phase}"] = f"{r.value:.2f}{mark}"
    return list(out.values())


# --- the baseline: harness floors --------------------------------------------------


@dataclass(frozen=True)
class Floor:
    """A native training step against its framework's idiomatic one, from a
    ``harness floors`` records file: medians and the 95% interval of
    native / idiomatic."""

    framework: str
    model: str
    batch: int
    native_s: float
    idiomatic_s: float
    low: float
    high: float
    source: str

    @property
    def ratio(self) -> float:
        return self.native_s / self.idiomatic_s


def floors(results_dir: Path, machine: str) -> dict[tuple[str, str, int], Floor]:
    """(framework, model, batch) -> the newest ``harness floors`` figure of
    ``machine`` in ``results_dir``; a file that cannot be read is passed
    over, and a record of it that is none (times outside ``MIN_STEP_S`` to
    ``MAX_STEP_S`` among them: ``harness.core.records``) is left out and
    counted in a warning on stderr.  A ratio whose interval is not finite is
    left out."""
    found: dict[tuple[str, str, int], Floor] = {}
    for path in sorted(results_dir.glob("floors-*.jsonl")):
        try:
            scanned = scan(path)
        except (OSError, ValueError):
            continue
        for warning in scanned.warnings():
            jsonl.warn(warning)
        recs = scanned.records
        steps: dict[tuple[str, str, int, str], list[float]] = {}
        for r in recs:
            if r.status != "ok" or name_of(r) != machine or r.phase != "train":
                continue
            step_s = r.values.get("step_s")
            if not isinstance(step_s, list) or not step_s:
                continue
            if not all(
                isinstance(v, int | float) and math.isfinite(v) and v > 0
                for v in step_s
            ):
                continue
            steps[r.framework, r.model, r.batch_size, r.api] = [
                float(v) for v in step_s
            ]
        for (framework, model, batch, api), native in steps.items():
            idiomatic = steps.get((framework, model, batch, "idiomatic"))
            if api != "path" or idiomatic is None:
                continue
            low, high = robust.ratio_ci(native, idiomatic)
            ratio = statistics.median(native) / statistics.median(idiomatic)
            if not all(math.isfinite(v) and v > 0 for v in (low, high, ratio)):
                continue
            found[framework, model, batch] = Floor(
                framework,
                model,
                batch,
                statistics.median(native),
                statistics.median(idiomatic),
                low,
                high,
                path.name,
            )
    return found


def standing(rows: Sequence[dict[str, Any]], floored: Iterable[Floor]) -> str:
    """One sentence on :func:`baseline`'s rows: which native steps are
    slower or faster than their framework's idiomatic one, and from which
    floors records."""
    said = []
    for stands, effect in (("native slower", "larger"), ("native faster", "smaller")):
        which = [
            f"{r['model']} on {r['framework']}"
            for r in rows
            if r["native step"] == stands
        ]
        if which:
            said.append(
                f"{stands} than the idiomatic step: {', '.join(which)} (Keras over "
                f"the idiomatic step {effect} than over native there)"
            )
    sources = sorted({f.source for f in floored})
    return (
        "; ".join(said) or "every native step about as fast as the idiomatic one"
    ) + (
        ". Keras over the idiomatic step is what a user of that framework would "
        f"compare against; from {', '.join(sources)}"
    )


def baseline(
    found: Sequence[Ratio], floored: dict[tuple[str, str, int], Floor]
) -> list[dict[str, Any]]:
    """Per training ratio with a floors figure: native over idiomatic and
    Keras over the idiomatic step beside Keras over native (its interval
    the product of both intervals' ends: wider than either, as it must
    be)."""
    rows = []
    for r in found:
        f = floored.get((r.framework, r.model, r.batch))
        if r.phase != "train" or f is None:
            continue
        stands = (
            "native slower"
            if f.low > SLOWER
            else "native faster"
            if f.high < 1 / SLOWER
            else "about equal"
        )
        rows.append(
            {
                "model": r.model,
                "framework": r.framework,
                "batch": r.batch,
                "Keras / native": r.text(),
                "native / idiomatic": f"{f.ratio:.2f} [{f.low:.2f}, {f.high:.2f}]",
                "Keras / idiomatic": (
                    f"{r.value * f.ratio:.2f} [{r.low * f.low:.2f}, "
                    f"{r.high * f.high:.2f}]"
                ),
                "native step": stands,
            }
        )
    return rows


# --- findings: where a large overhead's time goes ---------------------------------


class _Explained(validated.Schema):
    """What a finding reads of a cell of an explain run's analysis."""

    model: explain.Name
    framework: explain.Name
    phase: explain.Name
    batch: explain.Batch
    total: explain.Figure
    parts: dict[explain.Name, explain.Figure]


# A count run's figures a finding prints: Keras' work over native's, and
# instructions added per step (a ratio of a million, or 1e15 instructions
# per step, is no measurement).
WorkRatio = Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]
Instructions = Annotated[float, Field(ge=-1e15, le=1e15, allow_inf_nan=False)]
# The largest count.json read: a count run of every model writes kilobytes.
COUNT_BYTES = 64 * 1024 * 1024


class _Counted(validated.Schema):
    """What a finding reads of a pair of a count run's analysis."""

    model: explain.Name
    framework: explain.Name
    phase: explain.Name
    batch: explain.Batch
    work_ratio: WorkRatio
    added_non_kernel: Instructions
    top_added: list[tuple[str, Instructions]] = Field(default_factory=list)


class _CountRun(validated.Schema):
    pairs: list[Any]


def explained(
    results_dir: Path, machine: str
) -> dict[tuple[str, str, str], tuple[str, dict[str, Any]]]:
    """(model, framework, phase) -> (explain run folder name, cell), the
    newest run of ``machine`` that analysed it; a run whose files cannot be
    read is named once on stderr (``harness.report.explain_runs``), cells of
    another shape are passed over."""
    found: dict[tuple[str, str, str], tuple[str, dict[str, Any]]] = {}
    for folder in sorted(p.parent for p in results_dir.glob("explain-*/explain.json")):
        cells_ = explain.cells(folder)
        host = explain.host(folder) if cells_ is not None else None
        if cells_ is None or host is None:
            continue
        named = host.get("machine", {})
        if isinstance(named, dict) and named.get("name") not in (None, machine):
            continue
        for cell in cells_:
            if validated.fits(_Explained, cell):
                key = (cell["model"], cell["framework"], cell["phase"])
                found[key] = (folder.name, cell)
    return found


def counted(
    results_dir: Path,
) -> dict[tuple[str, str, str, int], tuple[str, dict[str, Any]]]:
    """(model, framework, phase, batch) -> (count run folder name, pair), the
    newest count run that counted it; a count.json that cannot be read (no
    regular file, too large, no JSON, no list of pairs) is named once on
    stderr and passed over, pairs of another shape too, silently."""
    found: dict[tuple[str, str, str, int], tuple[str, dict[str, Any]]] = {}
    for analysis in sorted(results_dir.glob("count-*/count.json")):
        try:
            run = files.read_object(analysis, COUNT_BYTES)
        except OSError as exc:  # files.Refused included
            jsonl.warn(f"warning: {exc}; that count run is left out of the report")
            continue
        if not validated.fits(_CountRun, run):
            jsonl.warn(
                f"warning: {analysis} holds no list of pairs; that count run is "
                "left out of the report"
            )
            continue
        pairs = run["pairs"]
        for pair in pairs:
            if validated.fits(_Counted, pair):
                key = (pair["model"], pair["framework"], pair["phase"], pair["batch"])
                found[key] = (analysis.parent.name, pair)
    return found


@dataclass(frozen=True)
class Finding:
    """A large overhead and what is known of where its time goes."""

    ratio: Ratio
    where: tuple[str, ...]  # sentences from explain and count records
    command: str | None  # what would explain it, where nothing does yet

    def text(self, markdown: bool = False) -> str:
        """One line; in ``markdown`` every name literal text and the command
        a code span (``harness.report.literal``)."""
        r = self.ratio
        said = " ".join(
            [
                f"{r.model} {r.phase} on {r.framework} (batch {r.batch}): "
                f"Keras/native {r.text()}"
                + (f" ({', '.join(r.marks)})" if r.marks else "")
                + ".",
                *self.where,
            ]
        )
        if markdown:
            said = literal.markdown(said)
        if self.command:
            command = literal.code(self.command) if markdown else f"`{self.command}`"
            said += f" not explained yet: {command}"
        return said


def large(found: Sequence[Ratio]) -> list[Ratio]:
    """Every overhead of at least ``LARGE`` that is verified and not wide
    (the largest of each model, framework and phase), largest first."""
    largest: dict[tuple[str, str, str], Ratio] = {}
    for r in found:
        if not r.verified or "wide" in r.marks or r.value < LARGE:
            continue
        key = (r.model, r.framework, r.phase)
        if key not in largest or r.value > largest[key].value:
            largest[key] = r
    return sorted(largest.values(), key=lambda r: -r.value)


def findings(
    found: Sequence[Ratio],
    results_dir: Path,
    machine: str,
    profile: str,
) -> list[Finding]:
    """The ``FINDINGS`` largest of :func:`large`, each with its explain
    parts and count figures where the results folder holds them, else the
    explain command for that cell."""
    shown = large(found)[:FINDINGS]
    if not shown:
        return []
    explains = explained(results_dir, machine)
    counts = counted(results_dir)
    own = {(r.model, r.framework, r.phase): r.batch for r in headline(found)}
    out = []
    for r in shown:
        where = []
        cell = explains.get((r.model, r.framework, r.phase))
        if cell is not None:
            where.append(_explain_sentence(*cell, r.batch))
        pair = counts.get((r.model, r.framework, r.phase, r.batch))
        if pair is not None:
            where.append(_count_sentence(*pair))
        command = None
        if not where:
            command = (
                f"python -m harness explain --profile {profile} --models {r.model} "
                f"--frameworks {r.framework} --phases {r.phase} --results "
                f"{literal.shown_path(results_dir)}"
            )
            # explain takes its parts at the model's batch size; a finding at
            # another one needs it in the sweep, whose fixed cost explains it.
            batch = own.get((r.model, r.framework, r.phase), r.batch)
            if batch != r.batch:
                sizes = sorted({r.batch, batch})
                command += f" --batch-sizes {','.join(map(str, sizes))}"
        out.append(Finding(r, tuple(where), command))
    return out


def _explain_sentence(run: str, cell: dict[str, Any], batch: int) -> str:
    """The parts of a Keras step beyond native work that take at least
    ``PART_SHARE`` of it, largest first."""
    total = cell["total"]["us"]
    parts = sorted(
        (
            (name, figure["us"])
            for name, figure in cell["parts"].items()
            if name != "native"
        ),
        key=lambda kv: -kv[1],
    )
    named = [
        f"{name} {us / 1e3:.3g} ms ({us / total:.0%})"
        for name, us in parts
        if total > 0 and us / total >= PART_SHARE
    ]
    native = cell["parts"].get("native")
    at = "" if cell["batch"] == batch else f" at batch {cell['batch']}"
    own = (
        f"; native work {native['us'] / total:.0%}"
        if native is not None and total > 0
        else ""
    )
    what = ", ".join(named) if named else "no part beyond native work above 10%"
    return f"Where Keras' step goes{at} (harness explain, {run}): {what}{own}."


def _count_sentence(run: str, pair: dict[str, Any]) -> str:
    """Keras' work over native's and the function it adds most to."""
    top = ""
    if pair["top_added"]:
        name, n = pair["top_added"][0]
        top = f"; most in {name[:100]} ({n / 1e6:.3g} M)"
    return (
        f"Instructions (harness count, {run}): Keras does {pair['work_ratio']:.2f}x "
        f"native's work and adds {pair['added_non_kernel'] / 1e6:.3g} M outside "
        f"kernels per step{top}."
    )


# --- the header --------------------------------------------------------------------


def header(
    records_path: Path, recs: list[Record], found: Sequence[doubts.Doubt]
) -> list[str]:
    """What was measured where: the machine, its threads, the libraries,
    the profile and run, what the gate said, how the cell repeats ended,
    and how many of each doubt (``found``: ``harness.report.doubts``)."""
    machine = describe(name_of(recs[0]), recs)
    isa = str(machine.get("cpu_isa") or "")
    wide_isa = "AVX-512" if "avx512f" in isa.split() else "no AVX-512"
    threads = _threads(recs)
    run_id = recs[0].run_id or records_path.stem.removeprefix("run-")
    cpu = ", ".join(str(v) for v in (machine.get("cpu_model"), machine.get("cpu")) if v)
    endings, _ = outcome(recs)
    closing = closing_of(records_path)
    return [
        f"machine: {machine['machine']}, {cpu or 'CPU not recorded'} "
        f"({isa or 'ISA not recorded'}: {wide_isa}), {machine.get('cores')} cores"
        + (f", {machine['memory_gb']} GB" if machine.get("memory_gb") else ""),
        f"threads: {threads}",
        f"libraries: {machine.get('frameworks') or 'not recorded'}",
        f"profile {recs[0].profile}, run {run_id}"
        f"{_date(run_id) or _date(records_path.stem.removeprefix('run-'))}; "
        f"records {literal.shown_path(records_path)}",
        f"matmul peak: {_peak(recs)}",
        f"gate: {_gate(recs)}",
        *([f"time: {closing.time_line()}"] if closing else []),
        *([line] if closing and (line := closing.unstarted_line()) else []),
        f"{sum(endings.values())} cell repeats: "
        + ", ".join(f"{n} {status}" for status, n in sorted(endings.items())),
        f"doubts: {doubts.counted(found)}"
        + (" (each named under Doubts, below)" if found else ""),
    ]


class _Source(validated.Schema):
    """A source of a record's ``platform["matmul_peak"]`` that gave a figure:
    a rate from 0 to ``peak.MAX_FLOPS_PER_S`` and a kernel's name of at most
    ``peak.MAX_KERNEL_CHARS`` characters (``harness.core.records`` reads no
    record outside them; a record made otherwise is checked here again)."""

    status: str
    flops_per_s: peak.Rate
    kernel: peak.KernelName


def _peak(recs: list[Record]) -> str:
    """The matmul peak the cells' ``peak_frac`` divides by: its figure,
    which source gave it with the kernel it ran, and the other sources'
    figures (``harness.core.peak``), from the first record that holds one
    of that shape; an older record's bare figure as it is (when within
    ``peak.MAX_FLOPS_PER_S``).  A source whose name is longer than
    ``peak.MAX_KERNEL_CHARS`` is not shown."""
    for r in recs:
        found = r.platform.get("matmul_peak")
        sources = found.get("sources") if isinstance(found, dict) else None
        if not isinstance(sources, dict):
            continue
        sources = {
            name: entry
            for name, entry in sources.items()
            if len(name) <= peak.MAX_KERNEL_CHARS
        }
        rated = {
            name: entry
            for name, entry in sources.items()
            if validated.fits(_Source, entry) and entry["status"] == "ok"
        }
        if not rated:
            continue
        best = max(rated, key=lambda name: rated[name]["flops_per_s"])
        others = [
            f"{name} {entry['flops_per_s'] / 1e9:.0f}"
            for name, entry in rated.items()
            if name != best
        ]
        skipped = sorted(set(sources) - set(rated))
        return (
            f"{rated[best]['flops_per_s'] / 1e9:.0f} GFLOP/s float32, from {best} "
            f"({rated[best]['kernel']})"
            + (f"; others: {', '.join(others)}" if others else "")
            + (f"; not measured: {', '.join(skipped)}" if skipped else "")
        )
    figures = [r.platform.get("matmul_peak_flops") for r in recs]
    bare = [
        f
        for f in figures
        if isinstance(f, int | float)
        and not isinstance(f, bool)
        and 0 < f <= peak.MAX_FLOPS_PER_S
    ]
    if bare:
        return f"{bare[0] / 1e9:.0f} GFLOP/s float32 (NumPy's BLAS, kernel unknown)"
    return "not measured"


def _date(run_id: str) -> str:
    """`` (YYYY-MM-DD HH:MM)`` from a run id that starts with its time."""
    stamp = run_id.split("-")
    if len(stamp) >= 2 and len(stamp[0]) == 8 and len(stamp[1]) == 6:
        d, t = stamp[0], stamp[1]
        if (d + t).isdigit():
            return f" ({d[:4]}-{d[4:6]}-{d[6:]} {t[:2]}:{t[2:4]})"
    return ""


def _threads(recs: list[Record]) -> str:
    """The workers' threads and CPUs, as the records name them."""
    found = {
        json.dumps(r.platform.get("threads"), sort_keys=True, default=str)
        for r in recs
        if isinstance(r.platform.get("threads"), dict)
    }
    if len(found) != 1:
        return "not recorded" if not found else f"{len(found)} settings (see cells)"
    t = json.loads(found.pop())
    parts = [f"{t.get('intra_op', '?')} intra-op, {t.get('inter_op', '?')} inter-op"]
    if t.get("worker_cpus"):
        parts.append(f"worker on CPU {','.join(map(str, t['worker_cpus']))}")
    if t.get("helpers"):
        parts.append(f"helper threads {t['helpers']}")
    return ", ".join(parts)


def _gate(recs: list[Record]) -> str:
    """How many (model, path) the gate passed, and the others' verdicts."""
    verdicts: dict[tuple[str, str], str] = {}
    for r in final(recs):
        verdicts[r.model, r.path] = r.equivalence
    passed = sum(1 for v in verdicts.values() if v == "pass")
    others = sorted(
        f"{model} {path} {v}" for (model, path), v in verdicts.items() if v != "pass"
    )
    line = f"{passed} of {len(verdicts)} model paths pass"
    return line + (f"; {', '.join(others)}" if others else "")
