"""``python -m harness report``: tables from the records of a run.

This module loads a records file (:func:`harness.core.records.scan`, warning on
stderr about lines that are JSON but no record) and renders what
:mod:`harness.report.analysis` computes from it, as a plain-text or GitHub Markdown
table, CSV or JSON.

Two tables: every cell (model, path, phase, batch size) with its median,
spread (IQR, a bootstrap 95% CI of the median, an ``unstable`` warning when the
IQR exceeds 10% of the median), its equivalence verdict and, when the records
carry them, latency percentiles, resource use and the fraction of the
machine's matmul peak; and per model, framework, phase and batch size the
Keras time, the native time and their ratio (Keras / native, above 1 means the
high-level API costs time) with a bootstrap CI.  A time measured without a
passing equivalence verdict is marked ``unverified`` in every row it enters.

``--compare OLD NEW`` tests every cell present in both files for a change
(see :mod:`harness.stats.robust` for the test and its limits).

Samples are pooled only within one machine (:mod:`harness.core.machines`).  A
records file that holds several machines (a cluster run on different node
types) gets each machine's tables under a heading naming it, then the
machines side by side; ``--machines A B ...`` shows the result sets of
several machines side by side: what each machine is, every cell's median per
machine with its ratio to the first machine's, and the Keras/native overhead
ratios per machine.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tabulate import tabulate

from harness.core.cells import closing_of
from harness.core.machines import describe, group, name_of
from harness.core.records import Record, scan
from harness.report import doubts, literal, modes, summary
from harness.report.analysis import (
    PAIRED_ALPHA,
    cell_rows,
    cells,
    compare_pair_rows,
    compare_rows,
    machine_cell_rows,
    machine_overhead_rows,
    overhead_rows,
    precision,
    run_to_run,
)
from harness.report.threads import (
    counts,
    main_records,
    overhead_by_count,
    scaling_rows,
)
from harness.stats import paired, robust
from workers.resources import CONTENDED_CORES, CONTENDED_STEAL
from zoo import files

FORMATS = ("table", "markdown", "csv", "json")


def latest_run(results_dir: Path) -> Path:
    """The newest ``run-*.jsonl`` in ``results_dir``.

    Raises FileNotFoundError when there is none."""
    runs = sorted(results_dir.glob("run-*.jsonl"))
    if not runs:
        raise FileNotFoundError(
            f"no run records in {results_dir}; run 'python -m harness run' first"
        )
    return runs[-1]


def load(records_path: Path) -> list[Record]:
    """Every record of a records file; prints a warning line on stderr when
    some lines were JSON but no record, and one when the last line was torn
    (``records.Scan.warnings``).

    Raises FileNotFoundError for a missing file and ValueError for a file that
    holds no records, is not UTF-8 text, or holds a record of a newer or
    unknown schema version."""
    if not records_path.is_file():
        raise FileNotFoundError(
            f"{records_path} is not a records file; give a run-*.jsonl written by "
            "'python -m harness run'"
        )
    found = scan(records_path)
    for warning in found.warnings():
        print(warning, file=sys.stderr)
    if not found.records:
        raise ValueError(
            f"{records_path} holds no records; give a run-*.jsonl written by "
            "'python -m harness run'"
        )
    return found.records


def _combine_ci(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows for reading: each ``..ci_low..``/``..ci_high..`` pair of columns
    becomes one ``..ci95..`` column ("low–high") in the low column's place."""
    out = []
    for row in rows:
        shown: dict[str, Any] = {}
        for key, value in row.items():
            if "ci_high" in key:
                continue
            if "ci_low" in key:
                high = row[key.replace("ci_low", "ci_high")]
                shown[key.replace("ci_low", "ci95")] = (
                    None if value is None else f"{value:g}–{high:g}"
                )
                continue
            shown[key] = value
        out.append(shown)
    return out


def _drop_empty_columns(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows without the columns that are empty in every row (the optional
    measurements a run did not record, the marks nothing earned)."""
    keep = [k for k in (rows[0] if rows else {}) if any(r[k] is not None for r in rows)]
    return [{k: r[k] for k in keep} for r in rows]


def render(rows: list[dict[str, Any]], fmt: str, missing: str = "—") -> str:
    """Rows as JSON, CSV (every column, machine-readable), or a plain-text or
    GitHub Markdown table (CIs joined, empty columns dropped, an empty cell
    shown as ``missing``; in Markdown every text, and every column's name,
    literal: ``harness.report.literal``)."""
    if fmt == "json":
        return json.dumps(rows, indent=2)
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]) if rows else [])
        writer.writeheader()
        writer.writerows(rows)
        return buffer.getvalue()
    shown = _drop_empty_columns(_combine_ci(rows))
    if fmt == "markdown":  # a record's strings are text, never Markdown
        shown = [
            {
                literal.markdown(key): literal.markdown(v) if isinstance(v, str) else v
                for key, v in row.items()
            }
            for row in shown
        ]
    table: str = tabulate(
        shown,
        headers="keys",
        missingval=missing,
        floatfmt="g",
        tablefmt="github" if fmt == "markdown" else "simple",
    )
    return table


def _section(title: str, body: str, fmt: str) -> str:
    return f"## {title}\n\n{body}" if fmt == "markdown" else f"{title}\n{body}"


def report(records_path: Path, fmt: str, table: str) -> str:
    """The report of one records file: both tables for ``table`` and
    ``markdown``, else the ``table`` named (``cells``, ``overhead`` or
    ``machines``)."""
    return render_report(records_path, load(records_path), fmt, table)


def render_report(
    records_path: Path,
    recs: list[Record],
    fmt: str,
    table: str,
    plots: Sequence[str] = (),
) -> str:
    """:func:`report` of records already loaded from ``records_path``; the
    records of several machines get each machine's tables apart, then side by
    side (csv and json: the ``table`` named, with a ``machine`` column).
    ``plots``: the plot files written beside the report (paths relative to
    it, as :func:`plots_by_machine` names them), shown inline."""
    groups = group(recs)
    if fmt not in ("table", "markdown"):
        if table == "machines":
            return render([describe(name, mine) for name, mine in groups.items()], fmt)

        closing = closing_of(records_path)
        stops = closing.stops if closing else None

        def rows_of(mine: list[Record]) -> list[dict[str, Any]]:
            if table == "cells":
                return cell_rows(main_records(mine))
            return overhead_rows(main_records(mine), stops)

        if len(groups) == 1:
            return render(rows_of(recs), fmt)
        return render(
            [
                {"machine": name, **row}
                for name, mine in groups.items()
                for row in rows_of(mine)
            ],
            fmt,
        )
    if len(groups) == 1:
        return "\n\n".join([_title(fmt), *_tables(records_path, recs, fmt, plots)])
    sections = [
        _line(
            f"records: {records_path} ({len(groups)} machines: "
            f"{', '.join(groups)}; each one's tables apart, then side by side)",
            fmt,
        )
    ]
    for name, mine in groups.items():
        sections.append(_heading(f"machine {name}", fmt))
        prefix = f"machine-{files.file_name(name)}/"
        mine_plots = [p for p in plots if p.startswith(prefix)]
        sections += [s for s in _tables(records_path, mine, fmt, mine_plots) if s]
    return "\n\n".join(sections + _side_by_side(groups, fmt))


def _title(fmt: str) -> str:
    title = "What Keras costs over hand-written native code"
    return f"# {title}" if fmt == "markdown" else f"{title}\n{'=' * len(title)}"


def _heading(title: str, fmt: str) -> str:
    """A heading above a machine's sections, one level above theirs (its
    text literal in Markdown: it names a machine)."""
    if fmt == "markdown":
        return f"# {literal.markdown(title)}"
    return f"{title}\n{'=' * len(title)}"


def _tables(
    records_path: Path, recs: list[Record], fmt: str, plots: Sequence[str] = ()
) -> list[str]:
    """The sections of one machine's report, in the order a reader asks
    (``harness.report.summary``): what was measured where, the answer,
    the baseline's standing, the largest overheads and where their time
    goes, what to doubt, the plots; then the details: every ratio, the
    execution modes and thread sweep where timed, the notes, and every
    cell last."""
    sweep = _threads_section(recs, fmt)
    recs = main_records(recs)
    closing = closing_of(records_path)
    overheads = overhead_rows(recs, closing.stops if closing else None)
    return [
        *_summary_sections(records_path, recs, overheads, fmt),
        *_plots_section(plots, fmt),
        _section(
            "Keras over native, every batch size",
            "overhead: Keras' time over native's. A paired cell times Keras "
            "and native in alternating blocks in one process and reads the "
            "ratio of each pair of blocks (their Hodges-Lehmann estimate, with "
            "a bootstrap 95% CI over processes and blocks), so drift both "
            "sides share cancels; keras_ms / native_ms divides each side's "
            "median over all its own samples, pooled over processes, and so "
            "differs from it by that drift. Unpaired cells: keras_ms / "
            "native_ms.\n\n" + _with_legend(overheads, fmt),
            fmt,
        ),
        *_modes_section(recs, fmt),
        *sweep,
        "\n".join(_bullet(n, fmt) for n in _machine_notes(records_path, recs)),
        _section(
            "cells (time: ms per training step or per inference "
            "mini-batch; median, IQR and bootstrap 95% CI of the median "
            "over every timed repeat)",
            _with_legend(cell_rows(recs), fmt),
            fmt,
        ),
    ]


# What each column of the detailed tables means, in a reader's words (the
# legend under a table names the columns it shows).
COLUMNS = {
    "model": "the model",
    "path": "the API and framework that ran it (keras-X: Keras 3 on backend X; "
    "native-X: written by hand in X)",
    "framework": "the framework both sides ran on",
    "phase": "train: one training step; infer: one inference mini-batch",
    "batch_size": "samples per step or mini-batch",
    "status": "how the cell's repeats ended (ok; not-timed: held back by the gate)",
    "runs": "fresh processes that timed it",
    "n": "timed samples over those processes",
    "time_ms": "median time, ms",
    "iqr_ms": "interquartile range of the samples, ms",
    "ci95_ms": "bootstrap 95% CI of the median, ms",
    "unstable": "the IQR is above 10% of the median",
    "first_step_s": "the first training step alone (compiling), s",
    "batches_per_s": "inference mini-batches per second",
    "cpu_util": "CPU time over wall time while timed",
    "user_ms": "CPU time in user mode per step, ms",
    "sys_ms": "CPU time in the kernel per step, ms",
    "minflt": "minor page faults per step",
    "peak_rss_mb": "largest resident memory, MB",
    "peak_gpu_mb": "largest device memory, MB",
    "peak_frac": "FLOP/s over the machine's matmul peak (above 1: a doubt)",
    "check": "a sanity check that failed",
    "busy": "contended: other processes took CPU time meanwhile; waited N%: "
    "its timing thread waited for a CPU N% of its time; idle N%: its process "
    "computed for N% less of one block's time than of another's (see Doubts)",
    "equivalence": "the equivalence gate's verdict for this path",
    "mark": "unverified: timed without the gate's pass; wide: too uncertain "
    "to compare (see Doubts)",
    "keras_ms": "Keras' median time, ms",
    "native_ms": "native's median time, ms",
    "overhead": "Keras over native (above 1: Keras costs time)",
    "overhead_ci95": "its 95% CI",
    "half_width": f"the CI's half-width over the ratio (wide above {paired.WIDE:.0%})",
    "pairs": "processes x Keras/native block pairs per process (unpaired: timed apart)",
    "stopped": "why it got no more processes: target (the CI narrow enough), "
    "budget (its own cell_budget_s spent), max_repeats (the most processes "
    "allowed), run_budget (the run's budget could not buy its next process), "
    "unstarted (nor its first), "
    "unfinished (the run was stopped first)",
    "keras_equivalence": "the gate's verdict for Keras",
    "native_equivalence": "the gate's verdict for native",
}


def _with_legend(rows: list[dict[str, Any]], fmt: str) -> str:
    """A detailed table and, under it, what each column it shows means."""
    table = render(rows, fmt)
    shown = _drop_empty_columns(_combine_ci(rows))
    names = list(shown[0]) if shown else []
    said = []
    for name in names:
        meaning = COLUMNS.get(name)
        if meaning is None and name.startswith("latency_"):
            meaning = f"{name.split('_')[1]} percentile of per-call latency, ms"
        if meaning is not None:
            said.append(f"{name}: {meaning}")
    if not said:
        return table
    legend = "; ".join(said) + "."
    return f"{table}\n\n{_line(legend, fmt)}"


def _line(line: str, fmt: str) -> str:
    """A line of text, which may name what records hold: literal in
    Markdown (``harness.report.literal``)."""
    return literal.markdown(line) if fmt == "markdown" else line


def _bullet(line: str, fmt: str) -> str:
    """A line of a list, literal text (:func:`_line`)."""
    return f"- {_line(line, fmt)}" if fmt == "markdown" else line


def _summary_sections(
    records_path: Path,
    recs: list[Record],
    overheads: list[dict[str, Any]],
    fmt: str,
) -> list[str]:
    """The header, the answer, the baseline, the findings and the doubts
    (``harness.report.summary``, ``harness.report.doubts``)."""
    results = records_path.parent
    machine = name_of(recs[0])
    found = summary.ratios(overheads)
    doubted = doubts.of_run(recs, overheads)
    sections = [
        "\n".join(
            _bullet(line, fmt) for line in summary.header(records_path, recs, doubted)
        )
    ]
    missing = summary.unrated(overheads)
    answer = summary.answer(found, missing)
    if answer:
        sections.append(
            _section(
                "The answer: what Keras costs over native",
                "\n".join(
                    _bullet(line, fmt) for line in summary.carried(found, missing)
                )
                + "\n\n"
                + render(answer, fmt)
                + "\n\nKeras' time over the hand-written native model's, per "
                "training step or inference mini-batch (above 1, Keras costs "
                "time), each model at its training batch size, and at batch 1 "
                "where the run timed one (a single sample: the most common "
                "`predict`). Read the median and the range over these models; "
                "the geometric mean stands beside them, and its 95% interval "
                "says how well these models were measured, not what other "
                "models would cost. Ratios too uncertain to compare (wide) or "
                "timed without the gate's pass (unverified) are left out of "
                "every figure and named.",
                fmt,
            )
        )
        sections.append(
            _section(
                "Per model",
                "Keras over native at the model's training batch size; marks: "
                "unverified (timed without the gate's pass), wide (95% CI "
                f"half-width above {paired.WIDE:.0%}), busy (see Doubts).\n\n"
                + render(summary.per_model(found), fmt),
                fmt,
            )
        )
    else:
        sections.append(
            _section("The answer", "no Keras/native pair was timed in this run", fmt)
        )
    floored = summary.floors(results, machine)
    base = summary.baseline(found, floored)
    if base:
        sections.append(
            _section(
                "The baseline's standing",
                "`harness floors`: each native training step against its "
                "framework's idiomatic one (`nn.Module` with `torch.optim`, the "
                "jitted step with Optax, the step compiled by XLA); "
                f"{_line(summary.standing(base, floored.values()), fmt)}.\n\n"
                + render(base, fmt),
                fmt,
            )
        )
    large = summary.large(found)
    findings = summary.findings(found, results, machine, recs[0].profile)
    wide = sum(1 for r in found if "wide" in r.marks and r.value >= summary.LARGE)
    sections.append(
        _section(
            "Findings: the largest overheads",
            (
                f"{len(large)} overheads of {summary.LARGE}x or more (verified, "
                "not wide; the largest of each model, framework and phase)"
                + (f"; {wide} more too uncertain to compare (Doubts)" if wide else "")
                + f": the {len(findings)} largest here, with where the time goes "
                "where `harness explain` or `harness count` measured the cell"
                + (
                    ", the rest in [Keras over native, every batch size]"
                    "(#keras-over-native-every-batch-size)"
                    if len(large) > len(findings)
                    else ""
                )
                + ".\n\n"
                if large
                else ""
            )
            + (
                "\n".join(
                    f"- {f.text(markdown=True)}" if fmt == "markdown" else f.text()
                    for f in findings
                )
                or f"none of {summary.LARGE}x or more"
            ),
            fmt,
        )
    )
    sections.append(
        _section(
            "Doubts",
            (
                f"{doubts.counted(doubted)}, each below. "
                + "; ".join(
                    f"{kind}: {doubts.MEANING[kind]}"
                    for kind in doubts.KINDS
                    if doubts.of_kind(doubted, kind)
                )
                + ".\n\n"
                + "\n".join(_bullet(d.text(), fmt) for d in doubted)
            )
            if doubted
            else "none: every cell quiet, verified, timed and below the "
            f"machine's peak, every ratio's interval within {paired.WIDE:.0%}",
            fmt,
        )
    )
    return sections


def _plots_section(plots: Sequence[str], fmt: str) -> list[str]:
    """The plots, inline (Markdown) or named (plain text)."""
    if not plots:
        return []
    if fmt == "markdown":
        body = "\n\n".join(f"![{Path(p).stem}]({p})" for p in plots)
    else:
        body = "\n".join(plots)
    return [_section("Plots", body, fmt)]


def _threads_section(recs: list[Record], fmt: str) -> list[str]:
    """A thread sweep's cells and ratios at every count (``thread_report``);
    nothing for a run without one."""
    found = counts(recs)
    if not found:
        return []
    return [
        _section(
            f"scaling with cores (thread counts {', '.join(map(str, found))}; the "
            "tables above are at "
            f"{found[-1]}): ms per step or mini-batch, median and 95% CI, at each "
            "count t<n> (n pinned CPUs, n intra-op threads); speedup: the "
            f"smallest count's median over the largest's; efficiency: speedup "
            f"/ {found[-1] // found[0]}",
            render(scaling_rows(recs), fmt),
            fmt,
        ),
        _section(
            "Keras over native at each thread count (paired overhead ratio [95% CI])",
            render(overhead_by_count(recs), fmt),
            fmt,
        ),
    ]


def _modes_section(recs: list[Record], fmt: str) -> list[str]:
    """The execution modes table (``harness.report.modes``), where the run
    timed modes other than the defaults."""
    if not modes.has_modes(recs):
        return []
    return [
        _section(
            "execution modes (ms per step / mini-batch: median and bootstrap 95% "
            "CI over fresh processes; first: the first step or round alone, "
            "compiling from an empty cache, median and largest over the "
            "processes; BEST: the fastest verified mode of its API and "
            "framework, TIE: its CI overlaps the best's)",
            render(modes.rows(recs), fmt),
            fmt,
        )
    ]


def plots_by_machine(recs: list[Record], out_dir: Path) -> list[Path]:
    """:func:`harness.report.plots.write_plots` of the records into ``out_dir``, or,
    for the records of several machines, each machine's into
    ``out_dir/machine-<name>``; raises ImportError without matplotlib."""
    from harness.report.plots import write_plots

    groups = group(recs)
    if len(groups) == 1:
        return write_plots(main_records(recs), out_dir)
    return [
        path
        for name, mine in groups.items()
        for path in write_plots(
            main_records(mine), out_dir / f"machine-{files.file_name(name)}"
        )
    ]


def _machine_notes(records_path: Path, recs: list[Record]) -> list[str]:
    """Whether the machine of ``recs`` was busy, and how much the ratios of
    the runs of the same machine in the same folder moved from run to run."""
    notes = _busy_note(recs) + _precision_note(recs)
    name = name_of(recs[0])
    # Runs of this machine measured as these were: a run whose workers ran
    # with other threads or CPUs (a confined run beside a free one) measured
    # another quantity, and its ratios are no repeat of these.
    placed = _placement(recs[0])
    runs = []
    for path in sorted(records_path.parent.glob("run-*.jsonl")):
        try:
            found = [
                r
                for r in scan(path).records
                if name_of(r) == name and _placement(r) == placed
            ]
        except ValueError:
            continue
        if found:
            runs.append(found)
    variation = run_to_run(runs)
    if variation is not None:
        notes.append(
            f"machine {name}: median run-to-run variation of the paired overhead "
            f"ratios over {len(runs)} runs in {records_path.parent} measured with "
            f"the same threads and CPUs: {variation:.1%}"
        )
    return notes


def _placement(record: Record) -> str:
    """Where ``record``'s worker ran (``platform["threads"]``), comparable."""
    return json.dumps(record.platform.get("threads"), sort_keys=True, default=str)


def _precision_note(recs: list[Record]) -> list[str]:
    """How precise the paired ratios are, and which are too wide to read."""
    found = precision(recs)
    if found is None:
        return []
    median, count, wide = found
    line = f"paired overhead ratios: median 95% CI half-width {median:.1%} over {count}"
    if wide:
        line += (
            f"; {wide} wide (half-width above {paired.WIDE:.0%}: marked wide, "
            "faded in the plot, left out of every comparison and run-to-run figure)"
        )
    return [line]


def _busy_note(recs: list[Record], name: str | None = None) -> list[str]:
    """A warning when cells of ``recs`` were measured on a busy machine."""
    busy = len(doubts.of_kind(doubts.of_run(recs, ()), "busy"))
    if not busy:
        return []
    return [
        f"BUSY MACHINE{f' {name}' if name else ''}: {busy} cells were measured "
        f"while other processes took more than {CONTENDED_CORES} cores (or the "
        f"hypervisor stole more than {CONTENDED_STEAL:.0%}); their times and "
        "ratios are suspect (column busy), measure again on a quiet machine or "
        "pin the workers (pin_cpus in the blueprint)"
    ]


def _side_by_side(groups: dict[str, list[Record]], fmt: str) -> list[str]:
    """What each machine is, every cell's time per machine with the ratio to
    the first machine, and the Keras/native ratios per machine; ``-`` where a
    machine has no time."""
    first = next(iter(groups))
    return [
        _section(
            "machines (cores: the logical CPUs the harness could use; frameworks: "
            "the versions their records name)",
            render([describe(name, mine) for name, mine in groups.items()], fmt, "-"),
            fmt,
        ),
        _section(
            "cells side by side (ms per training step or per inference "
            "mini-batch: median and bootstrap 95% CI of the median per machine; "
            f"NAME/{first}: that median over {first}'s)",
            render(machine_cell_rows(groups), fmt, "-"),
            fmt,
        ),
        _section(
            "Keras over native side by side (each machine's overhead ratio and "
            "its 95% CI, from its own records as in its Keras over native table)",
            render(machine_overhead_rows(groups), fmt, "-"),
            fmt,
        ),
    ]


def machines_report(sources: list[Path], fmt: str, table: str) -> str:
    """Several machines side by side, from records files or results folders
    (each folder's newest ``run-*.jsonl``); csv and json print the ``table``
    named (``cells``, ``overhead`` or ``machines``) side by side.

    Raises ValueError for a missing file or folder, a folder without runs,
    records of fewer than two machines, and records of one machine name whose
    environments differ (``harness.report.analysis.cells``)."""
    paths = [_run_file(source) for source in sources]
    everything = group(r for path in paths for r in load(path))
    groups = {name: main_records(mine) for name, mine in everything.items()}
    for mine in groups.values():
        # First: two machines that claim one name are found out here, before
        # they could pass for one machine.
        cells(mine)
    if len(groups) < 2:
        raise ValueError(
            f"--machines found one machine ({next(iter(groups))}) in "
            f"{', '.join(str(p) for p in paths)}; give result sets of at least two "
            "machines"
        )
    if fmt not in ("table", "markdown"):
        if table == "machines":
            return render([describe(name, mine) for name, mine in groups.items()], fmt)
        side_by_side = machine_cell_rows if table == "cells" else machine_overhead_rows
        return render(side_by_side(groups), fmt)
    notes = [n for name, mine in groups.items() for n in _busy_note(mine, name)]
    return "\n\n".join(
        [
            "records: " + ", ".join(str(p) for p in paths),
            *_side_by_side(groups, fmt),
            *(["\n".join(notes)] if notes else []),
        ]
    )


def _run_file(source: Path) -> Path:
    """``source`` when it is a file, its newest ``run-*.jsonl`` when it is a
    folder; raises ValueError when it is neither or the folder has no run."""
    if source.is_dir():
        runs = sorted(source.glob("run-*.jsonl"))
        if not runs:
            raise ValueError(
                f"--machines: {source} holds no run-*.jsonl; give a results folder "
                "that 'python -m harness run' wrote into, or a records file"
            )
        return runs[-1]
    if not source.is_file():
        raise ValueError(
            f"--machines: {source} does not exist; give a records file "
            "(run-*.jsonl) or a results folder"
        )
    return source


def _compare_notes(rows: list[dict[str, Any]]) -> list[str]:
    notes = []
    few = {(r["n_old"], r["n_new"]) for r in rows if r["verdict"] == "too few samples"}
    for n_old, n_new in sorted(few):
        notes.append(
            f"with {n_old} old and {n_new} new samples the smallest possible "
            f"p-value is {robust.min_p_value(n_old, n_new):.3g}, so no change can "
            f"be significant at {robust.ALPHA}; time more repeats"
        )
    notes.append(
        f"each cell is tested alone at p < {robust.ALPHA}: among {len(rows)} "
        f"unchanged cells expect about {len(rows) * robust.ALPHA:.1f} false flags"
    )
    return notes


def _compare_answer(
    rows: list[dict[str, Any]], pairs: list[dict[str, Any]]
) -> list[str]:
    """The changed paired ratios, each, and how many cells got slower or
    faster: the comparison's answer, before its tables."""
    lines = [
        f"Keras over native {r['verdict']}: {r['model']} {r['phase']} on "
        f"{r['framework']} b{r['batch_size']}, {r['change_pct']:+.1f}% "
        f"[{r['change_ci_low_pct']:+.1f}, {r['change_ci_high_pct']:+.1f}]"
        for r in pairs
        if r["verdict"] in ("higher", "lower")
    ]
    if pairs:
        wide = sum(1 for r in pairs if str(r["verdict"]).startswith("wide"))
        lines.append(
            f"{len(lines)} of {len(pairs)} paired overhead ratios changed"
            + (f" ({wide} too wide for a verdict)" if wide else "")
        )
    counted = Counter(r["verdict"] for r in rows)
    how = ", ".join(f"{counted[v]} {v}" for v in ("slower", "faster") if counted[v])
    lines.append(
        f"cells that changed (p < {robust.ALPHA}, each cell alone): "
        + (f"{how}, of {len(rows)}" if how else f"none of {len(rows)}")
    )
    return lines


def compare_report(old_path: Path, new_path: Path, fmt: str) -> str:
    """Which cells got slower or faster from ``old_path`` to ``new_path``
    (two-sided Mann-Whitney U on the pooled samples, p < 0.05).

    Raises FileNotFoundError or ValueError for a missing or empty file, or for
    two files without a common timed cell."""
    old, new = load(old_path), load(new_path)
    rows = compare_rows(old, new)
    pairs = compare_pair_rows(old, new)
    if fmt in ("csv", "json"):
        return render(pairs or rows, fmt)
    notes = _compare_notes(rows)
    if pairs:
        flagged = sum(1 for r in pairs if r["verdict"] in ("higher", "lower"))
        notes.append(
            f"paired ratios: {flagged} of {len(pairs)} changed at p < "
            f"{PAIRED_ALPHA} (hierarchical bootstrap over processes and blocks)"
        )
    sections = [
        f"{_line(f'old: {old_path}', fmt)}\n{_line(f'new: {new_path}', fmt)}",
        _section(
            "The answer: what changed",
            "\n".join(_bullet(line, fmt) for line in _compare_answer(rows, pairs)),
            fmt,
        ),
    ]
    if pairs:
        sections.append(
            _section(
                "change of the paired Keras/native overhead ratios (change = new "
                "/ old - 1, 95% CI, p-value)",
                render(pairs, fmt),
                fmt,
            )
        )
    sections += [
        _section(
            "change per cell (ms per step or mini-batch; change = new / old - 1)",
            render(rows, fmt),
            fmt,
        ),
        "\n".join(_bullet(n, fmt) for n in notes),
    ]
    return "\n\n".join(sections)
