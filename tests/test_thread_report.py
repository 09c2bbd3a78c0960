"""A thread sweep's report: cells at each count side by side, never pooled
across counts, on synthetic records (no framework)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.bench.run import _check_resumable
from harness.core import records
from harness.report.analysis import cells
from harness.report.tables import report
from harness.report.threads import counts, main_records, overhead_by_count, scaling_rows
from tests.helpers import record

# (path, threads) -> the three repeats' seconds per step
TIMES = {
    ("native-torch", 1): (0.0040, 0.0041, 0.0039),
    ("native-torch", 2): (0.0020, 0.0021, 0.0019),
    ("keras-torch", 1): (0.0080, 0.0082, 0.0078),
    ("keras-torch", 2): (0.0050, 0.0051, 0.0049),
}


def _record(
    path: str, threads: int | None, sample: float, repeat: int
) -> records.Record:
    """One repeat of an ffn cell at batch 128, at ``threads`` (None: a run
    without a thread axis) on a 2-core machine."""
    settings: dict[str, object] = {"steps": 2}
    if threads is not None:
        settings["threads"] = threads
    return record(
        path,
        seconds=sample,
        repeat=repeat,
        run_id="sweep",
        profile="threads",
        batch_size=128,
        settings=settings,
        platform={
            "machine": {"name": "vm", "cpu_model": "AMD EPYC", "cores": 2},
            "git_revision": "abc",
            "threads": {"intra_op": threads or 2, "inter_op": 1},
        },
    )


def _sweep() -> list[records.Record]:
    return [
        _record(path, threads, sample, repeat)
        for (path, threads), samples in TIMES.items()
        for repeat, sample in enumerate(samples)
    ]


def test_counts_are_never_pooled_and_the_tables_read_one_thread() -> None:
    recs = _sweep()
    assert counts(recs) == [1, 2]
    with pytest.raises(ValueError, match="refusing to pool"):
        cells(recs)  # what the report would do without splitting by count
    main = main_records(recs)
    assert {r.settings["threads"] for r in main} == {1}
    found = cells(main)
    assert (
        found[("ffn", "native-torch", "train", 128)].summary.median
        == TIMES[("native-torch", 1)][0]
    )
    assert main_records(main[:3]) == main[:3]
    off_sweep = [_record("native-torch", None, 0.002, 0)]
    assert counts(off_sweep) == []
    assert main_records(off_sweep) == off_sweep


def test_scaling_rows_give_each_count_and_the_speedup() -> None:
    rows = {r["path"]: r for r in scaling_rows(_sweep())}
    native = rows["native-torch"]
    assert (native["t1_ms"], native["t2_ms"]) == (4.0, 2.0)
    assert native["t1_ci_low_ms"] <= 4.0 <= native["t1_ci_high_ms"]
    assert native["speedup"] == 2.0
    assert native["efficiency"] == 1.0
    assert rows["keras-torch"]["speedup"] == 1.6
    assert rows["keras-torch"]["efficiency"] == 0.8


def test_overhead_ratios_at_each_count() -> None:
    (row,) = overhead_by_count(_sweep())
    assert row["t1"].startswith("2.000")
    assert row["t2"].startswith("2.500")


def test_the_report_of_a_sweep_has_its_scaling_section(tmp_path: Path) -> None:
    out = tmp_path / "run-sweep.jsonl"
    for r in _sweep():
        records.append(out, r)
    text = report(out, "table", "overhead")
    assert "scaling with cores (thread counts 1, 2; the tables above are at 2)" in text
    assert "Keras over native at each thread count" in text


def test_a_sweep_resumes_although_its_cells_have_other_thread_counts(
    tmp_path: Path,
) -> None:
    from harness.core.profiles import PROFILES

    out = tmp_path / "run-sweep.jsonl"
    records.append(out, _record("native-torch", 1, 0.004, 0))
    profile = PROFILES["threads"]
    earlier = records.read(out)[0]
    host = {
        **earlier.platform,
        "threads": {"intra_op": 2, "inter_op": 1},
    }
    _check_resumable(
        out,
        profile.model_copy(update={"name": "threads"}),
        host,
    )
