"""Wide intervals: a ratio whose 95% CI half-width is above 10% is shown,
marked ``wide`` in the table and faded in the plot, and no summary or
comparison treats it as a finding (where a run's extra processes go:
tests/test_schedule.py).

Framework-free: records are made here, workers are shell scripts."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.core import records
from harness.report.analysis import (
    compare_pair_rows,
    overhead_rows,
    precision,
    run_to_run,
)
from harness.report.tables import report
from harness.stats import paired
from tests.helpers import (
    record,
)


def _pairs(
    ratio: float,
    processes: int,
    seed: int,
    *,
    spread: float,
    model: str = "ffn",
    run_id: str = "r",
) -> list[records.Record]:
    """Paired records of ffn on PyTorch whose processes' ratios scatter by
    ``spread`` (log-normal), 20 block pairs each."""
    rng = np.random.default_rng(seed)
    out = []
    for repeat in range(processes):
        native = list(0.001 * np.exp(rng.normal(0, 0.01, 20)))
        factor = ratio * np.exp(rng.normal(0, spread))
        keras = [n * factor for n in native]
        for api, blocks, partner in (
            ("keras", keras, "native-torch"),
            ("native", native, "keras-torch"),
        ):
            out.append(
                record(
                    f"{api}-torch",
                    model=model,
                    run_id=run_id,
                    batch_size=128,
                    repeat=repeat,
                    values={"block_s": blocks, "step_s": blocks, "partner": partner},
                    summary={"median_step_s": float(np.median(blocks))},
                    platform={"hostname": "h"},
                )
            )
    return out


WIDE = _pairs(2.0, 3, seed=0, spread=0.4)
NARROW = _pairs(2.0, 3, seed=1, spread=0.002)


def test_the_stand_ins_are_what_they_claim() -> None:
    (wide,) = overhead_rows(WIDE)
    (narrow,) = overhead_rows(NARROW)
    half = {
        name: (r["overhead_ci_high"] - r["overhead_ci_low"]) / 2 / r["overhead"]
        for name, r in (("wide", wide), ("narrow", narrow))
    }
    assert half["wide"] > paired.WIDE > 0.01 > half["narrow"]


def test_a_wide_ratio_is_marked_and_a_narrow_one_is_not() -> None:
    (wide,) = overhead_rows(WIDE)
    (narrow,) = overhead_rows(NARROW)
    assert wide["mark"] == "wide"
    assert narrow["mark"] is None
    unverified = [
        dataclasses.replace(r, verified=False) if r.api == "keras" else r for r in WIDE
    ]
    assert overhead_rows(unverified)[0]["mark"] == "unverified, wide"


def test_is_wide_at_the_threshold() -> None:
    assert not paired.is_wide(1.0, 0.91, 1.09)
    assert paired.is_wide(1.0, 0.89, 1.11)
    assert paired.is_wide(0.0, 0.0, 0.0)  # no ratio to read


def test_no_comparison_gives_a_verdict_on_a_wide_ratio() -> None:
    doubled = _pairs(4.0, 3, seed=2, spread=0.002)
    (row,) = compare_pair_rows(WIDE, doubled)
    assert row["verdict"] == "wide: no verdict"
    (row,) = compare_pair_rows(NARROW, doubled)
    assert row["verdict"] == "higher"  # the same change, read from narrow ones


def test_run_to_run_leaves_a_wide_ratio_out() -> None:
    moved = _pairs(2.2, 3, seed=3, spread=0.002)
    assert run_to_run([NARROW, moved]) == pytest.approx(0.1, abs=0.01)
    assert run_to_run([WIDE, moved]) is None  # the only cell is wide in one run


def test_precision_counts_the_wide_ones() -> None:
    other = _pairs(2.0, 3, seed=4, spread=0.002, model="lenet")
    median, count, wide = precision([*WIDE, *other])
    assert (count, wide) == (2, 1)
    assert median > 0.05


def test_the_report_marks_a_wide_ratio_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "run-1.jsonl"
    for r in [*WIDE, *_pairs(2.0, 3, seed=4, spread=0.002, model="lenet")]:
        records.append(out, r)
    text = report(out, "table", "overhead")
    assert "wide" in text
    assert "1 wide (half-width above 10%" in text
    assert "median 95% CI half-width" in text


def test_the_plot_fades_a_wide_ratio(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from harness.report import plots

    drawn: dict[str, list[Any]] = {}
    real = plots._grouped_bars

    def spy(
        ax: Any, groups: Any, series: Any, faded: Any = None, **options: Any
    ) -> None:
        drawn.setdefault("faded", []).append(set(faded or ()))
        real(ax, groups, series, faded, **options)
        drawn.setdefault("alphas", []).append([p.get_alpha() for p in ax.patches])

    plots._grouped_bars = spy  # type: ignore[assignment]
    try:
        plots.write_plots(
            [*WIDE, *_pairs(2.0, 3, seed=4, spread=0.002, model="lenet")], tmp_path
        )
    finally:
        plots._grouped_bars = real  # type: ignore[assignment]
    # the overhead plot's one panel (the step-time plot draws bars too)
    assert drawn["faded"][0] == {("torch", "ffn")}
    assert sorted(drawn["alphas"][0], key=lambda a: a or 1.0) == [0.35, None]


def test_run_to_run_compares_only_runs_measured_with_the_same_threads(
    tmp_path: Path,
) -> None:
    """A confined run beside two free ones measured another quantity: the
    run-to-run figure of the free ones counts two runs, not three."""

    def placed(recs: list[records.Record], helpers: str) -> list[records.Record]:
        threads = {"intra_op": 1, "inter_op": 1, "isolated": True, "helpers": helpers}
        return [
            dataclasses.replace(r, platform={**r.platform, "threads": threads})
            for r in recs
        ]

    runs = [
        placed(_pairs(2.0, 3, seed=7, spread=0.002), "free"),
        placed(_pairs(2.1, 3, seed=8, spread=0.002), "free"),
        placed(_pairs(3.0, 3, seed=9, spread=0.002), "confined"),
    ]
    for i, recs in enumerate(runs):
        for r in recs:
            records.append(tmp_path / f"run-{i}.jsonl", r)
    text = report(tmp_path / "run-1.jsonl", "table", "overhead")
    assert "ratios over 2 runs" in text
    assert "measured with the same threads and CPUs: 5." in text  # 2.1 / 2.0
