"""Scaling with cores: a thread sweep's cells side by side (``harness
report``, for a run whose blueprint sets ``thread_counts``, such as the
``threads`` profile's).

On a sweep every cell is timed once per thread count; a count of n pins the
worker to n CPUs with n intra-op threads (``harness.bench.run``), and its records
carry the count as ``settings["threads"]``.  Cells of different counts are
different cells and are never pooled: :func:`at_count` gives one count's
records, which the ordinary tables read (those of the smallest count, one
thread, the setting every other shipped profile times with), and
:func:`scaling_rows` the sweep: per cell, the median and 95% CI at every
count, the speed-up of the largest count over one thread and its parallel
efficiency (speed-up over the count), and per framework the Keras/native
overhead ratio at every count.  Framework-free, numbers only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from harness.core.records import Record
from harness.report.analysis import machine_cell_rows, overhead_rows


def count_of(record: Record) -> int | None:
    """The thread count a sweep timed ``record`` at; None off a sweep."""
    count = record.settings.get("threads")
    return count if isinstance(count, int) else None


def counts(recs: Iterable[Record]) -> list[int]:
    """The sweep's thread counts, ascending; empty when it is no sweep."""
    return sorted({c for r in recs if (c := count_of(r)) is not None})


def at_count(recs: Iterable[Record], count: int | None) -> list[Record]:
    """The records timed at ``count`` (None: those of no sweep)."""
    return [r for r in recs if count_of(r) == count]


def main_records(recs: list[Record]) -> list[Record]:
    """What the ordinary tables read: every record off a sweep; on one, the
    records of its smallest count (one thread: the overhead measure)."""
    found = counts(recs)
    return at_count(recs, found[0]) if found else recs


def scaling_rows(recs: list[Record]) -> list[dict[str, Any]]:
    """Per cell: ms at each count (median and 95% CI, as counts side by side
    like machines, ``analysis.machine_cell_rows``), and the speed-up of the
    largest count over the smallest with its efficiency (speed-up / the
    counts' ratio)."""
    found = counts(recs)
    rows = machine_cell_rows({f"t{c}": at_count(recs, c) for c in found})
    low, high = found[0], found[-1]
    for row in rows:
        ratio = row.pop(f"t{high}/t{low}", None) if high != low else None
        for c in found[1:-1]:
            row.pop(f"t{c}/t{low}", None)
        row["speedup"] = round(1 / ratio, 2) if ratio else None
        row["efficiency"] = round(low / ratio / high, 2) if ratio else None
    return rows


def overhead_by_count(recs: list[Record]) -> list[dict[str, Any]]:
    """The Keras/native overhead ratio of every paired cell at each count."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for c in counts(recs):
        for row in overhead_rows(at_count(recs, c)):
            key = (row["model"], row["framework"], row["phase"], row["batch_size"])
            entry = out.setdefault(
                key,
                dict(
                    zip(("model", "framework", "phase", "batch_size"), key, strict=True)
                ),
            )
            ratio = row.get("overhead")
            low, high = row.get("overhead_ci_low"), row.get("overhead_ci_high")
            entry[f"t{c}"] = (
                None
                if ratio is None
                else f"{ratio:.3f}"
                + (f" [{low:.3f}, {high:.3f}]" if low is not None else "")
            )
    return list(out.values())
