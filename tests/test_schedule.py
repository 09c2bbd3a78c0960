"""A run within its budget (``harness.bench.schedule``): planned processes
while they fit, then more where they narrow the answer most per second, and
every pair cell's reason to stop kept in the plan.  A fake clock stands in
for wall time (a test never waits on it).

Framework-free: records are made here, workers are shell scripts."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

import harness.bench.run
from harness.bench import schedule
from harness.cli.run import duration
from harness.core import records
from harness.core.cells import (
    Closing,
    Plan,
    closing_of,
    new_plan,
    plan_file,
    read_plan,
    write_plan,
)
from harness.report import summary
from harness.report.analysis import overhead_rows
from tests.helpers import READY, FakeClock, fake_python, no_framework, profile, record

TORCH = ["keras-torch", "native-torch"]


def _plan(**changes: object) -> Plan:
    """ffn and lenet trained on Keras-on-PyTorch against native PyTorch."""
    settings = {"repeats": 3, "max_repeats": 10, "cell_budget_s": 86_400.0}
    return new_plan(
        "r",
        profile(**{**settings, **changes}),
        models=["ffn", "lenet"],
        paths=TORCH,
        phases=["train"],
        keys={},
    )


def _pairs(plan: Plan, model: str, spread: float, seed: int) -> list[records.Record]:
    """Three processes of ``model``'s pair cell whose ratios (about 2)
    scatter by ``spread``, 20 block pairs each."""
    (unit,) = [u for u in plan.units if u.model == model and u.repeat == 0]
    rng = np.random.default_rng(seed)
    out = []
    for repeat in range(3):
        native = list(0.001 * np.exp(rng.normal(0, 0.01, 20)))
        factor = 2.0 * np.exp(rng.normal(0, spread))
        for api, blocks, partner in (
            ("keras", [n * factor for n in native], "native-torch"),
            ("native", native, "keras-torch"),
        ):
            out.append(
                record(
                    f"{api}-torch",
                    model=model,
                    batch_size=unit.batch_size,
                    repeat=repeat,
                    values={"block_s": blocks, "step_s": blocks, "partner": partner},
                    summary={"median_step_s": float(np.median(blocks))},
                )
            )
    return out


def _costs(plan: Plan, start_s: float, **cell_s: float) -> schedule.Costs:
    """Costs as if measured: every worker's start, each model's process."""
    costs = schedule.Costs(start_s={tuple(TORCH): [start_s]})
    for unit in plan.units:
        if unit.model in cell_s:
            costs.cell_s[unit.cells()[0]] = [cell_s[unit.model]]
    return costs


def test_the_widest_interval_goes_first_at_equal_cost() -> None:
    plan = _plan(ratio_target=0.001)
    recs = _pairs(plan, "ffn", 0.05, seed=5) + _pairs(plan, "lenet", 0.3, seed=6)
    (widest,) = schedule.narrowing(plan, recs, _costs(plan, 0.0, ffn=1, lenet=1), 1e9)
    assert (widest.model, widest.repeat, widest.index) == ("lenet", 3, len(plan.units))


def test_a_resumed_run_numbers_its_next_process_after_its_records() -> None:
    """A resumed run's plan holds the planned repeats alone; the records of
    the interrupted run hold repeats 0 to 2 (one extra): the next process is
    repeat 3, not a second repeat 2 that would replace the first."""
    plan = _plan(repeats=2, ratio_target=0.001)
    planned = plan.model_copy(update={"units": plan.units[:4]})  # repeats 0, 1
    recs = _pairs(planned, "lenet", 0.2, seed=7)  # repeats 0, 1, 2
    (unit,) = schedule.narrowing(planned, recs, _costs(plan, 0.0, lenet=1), 1e9)
    assert (unit.model, unit.repeat) == ("lenet", 3)


def test_a_cheap_cell_goes_before_a_costly_one_of_the_same_width() -> None:
    """The same spread (same seed): ffn's process costs 1 s, lenet's 20 s.
    With a free worker start ffn goes alone; with a 30 s start both share
    the worker (its start paid once buys more with both)."""
    plan = _plan(ratio_target=0.001)
    recs = _pairs(plan, "ffn", 0.2, seed=7) + _pairs(plan, "lenet", 0.2, seed=7)
    free = schedule.narrowing(plan, recs, _costs(plan, 0.0, ffn=1, lenet=20), 1e9)
    assert [u.model for u in free] == ["ffn"]
    shared = schedule.narrowing(plan, recs, _costs(plan, 30.0, ffn=1, lenet=20), 1e9)
    assert sorted(u.model for u in shared) == ["ffn", "lenet"]
    assert {u.repeat for u in shared} == {3}  # one worker serves both


def test_a_wide_cell_goes_before_a_narrow_one_that_shrinks_more_per_second() -> None:
    """A wide cell is left out of the answer: while one fits, it is refined
    before a read one, however cheap; when none fits, the read ones are."""
    plan = _plan(ratio_target=0.001)
    recs = _pairs(plan, "ffn", 0.03, seed=3) + _pairs(plan, "lenet", 0.12, seed=0)
    shown = {r["model"]: r["mark"] for r in overhead_rows(recs)}
    assert shown == {"ffn": None, "lenet": "wide"}  # lenet: 13.8%
    costs = _costs(plan, 0.0, ffn=0.01, lenet=30)
    (first,) = schedule.narrowing(plan, recs, costs, 1e9)
    assert first.model == "lenet"
    (only,) = schedule.narrowing(plan, recs, costs, 29.0)  # lenet does not fit
    assert only.model == "ffn"


def test_a_wide_cell_out_of_reach_is_not_refined_first() -> None:
    """At 47% after three processes, lenet would need some 40 more to read
    under 10%: more than its max_repeats (10), or than the run's time buys
    at 30 s a process; at 13.8% two more do, unless the time left pays for
    one alone."""
    plan = _plan(ratio_target=0.001)
    hopeless = _pairs(plan, "ffn", 0.03, seed=3) + _pairs(plan, "lenet", 0.4, seed=0)
    costs = _costs(plan, 0.0, ffn=0.01, lenet=30)
    (chosen,) = schedule.narrowing(plan, hopeless, costs, 1e9)
    assert chosen.model == "ffn"
    near = _pairs(plan, "ffn", 0.03, seed=3) + _pairs(plan, "lenet", 0.12, seed=0)
    assert schedule.narrowing(plan, near, costs, 61.0)[0].model == "lenet"
    assert schedule.narrowing(plan, near, costs, 45.0)[0].model == "ffn"


def test_nothing_starts_that_does_not_fit() -> None:
    plan = _plan(ratio_target=0.001)
    recs = _pairs(plan, "ffn", 0.2, seed=7) + _pairs(plan, "lenet", 0.2, seed=8)
    costs = _costs(plan, 10.0, ffn=5, lenet=50)
    assert schedule.narrowing(plan, recs, costs, 14.0) == []
    (only,) = schedule.narrowing(plan, recs, costs, 15.0)
    assert only.model == "ffn"
    # planned units: a costly one is passed over for a cheaper one after it
    lenet_first = sorted(
        (u for u in plan.units if u.repeat == 0), key=lambda u: u.model != "lenet"
    )
    assert [u.model for u in costs.fitting(lenet_first, 20.0)] == ["ffn"]


def test_a_narrow_cell_gets_no_more_processes_and_says_target() -> None:
    plan = _plan(ratio_target=0.05)
    recs = _pairs(plan, "ffn", 0.002, seed=1) + _pairs(plan, "lenet", 0.4, seed=0)
    costs = _costs(plan, 0.0, ffn=1, lenet=1)
    assert [u.model for u in schedule.narrowing(plan, recs, costs, 1e9)] == ["lenet"]
    stops = schedule.stops(plan, recs)
    assert stops == {
        next(u.pair_cell().name() for u in plan.units if u.model == "ffn"): "target",
        next(u.pair_cell().name() for u in plan.units if u.model == "lenet"): (
            "run_budget"
        ),
    }


def test_a_pair_the_gate_held_back_gets_no_more_processes() -> None:
    """Its side that passed is timed alone in the planned repeats; no ratio
    can come of more."""
    plan = _plan(repeats=1, max_repeats=5)
    held = [
        record(
            "keras-torch",
            status="not-timed",
            batch_size=u.batch_size,
            model=u.model,
            equivalence="fail",
        )
        for u in plan.units
    ]
    assert schedule.narrowing(plan, held, schedule.Costs(), math.inf) == []
    assert set(schedule.stops(plan, held).values()) == {"held_back"}
    crashed = [dataclasses.replace(r, status="error", equivalence="pass") for r in held]
    assert set(schedule.stops(plan, crashed).values()) == {"failed"}


def test_cells_the_budget_never_reached_are_named_by_framework() -> None:
    """A 5-minute run here timed JAX alone: PyTorch's cells were not
    failed, and the report's header must say they were left out."""
    plan = _plan()
    stops = schedule.stops(plan, [])
    assert set(stops.values()) == {"unstarted"}
    closing = Closing(budget_s=300.0, spent_s=312.0, stops=stops)
    assert closing.unstarted_line() == (
        "not timed within the budget: 2 pair cells (torch 2); a larger "
        "--budget times them"
    )
    assert Closing(spent_s=1.0, stops={"x": "target"}).unstarted_line() is None


def test_costs_are_learned_as_a_worker_start_and_each_cell_process() -> None:
    plan = _plan()
    group = [u for u in plan.units if u.repeat == 0]
    written = [
        record(p, model=u.model, batch_size=u.batch_size, summary={"wall_s": w})
        for u, w in zip(group, (4.0, 6.0), strict=True)
        for p in u.paths
    ]
    costs = schedule.Costs()
    costs.learn(group, 25.0, written)
    assert costs.start(tuple(TORCH)) == 15.0  # 25 s less the two requests' 10 s
    assert [costs.process(u) for u in group] == [4.0, 6.0]
    # a cell not measured yet: the median of its path's cells
    other = group[0].model_copy(update={"batch_size": 3})
    assert costs.process(other) == 5.0
    assert costs.start(("native-mxnet",)) == 15.0  # unseen: the longest seen
    # several workers' units at once (no budget): no start is read from them
    mixed = [*group, group[0].model_copy(update={"repeat": 1})]
    costs.learn(mixed, 1000.0, written)
    assert costs.start(tuple(TORCH)) == 15.0
    assert costs.process(group[0]) == 4.0


def _steady_worker(tmp_path: Path) -> str:
    """A paired worker whose processes alternate ratios 2.4 and 1.6: the
    interval never narrows, so only the budget or a cap stops it."""
    answers = tmp_path / "answers"
    answers.mkdir()
    for i, ratio in enumerate((2.4, 1.6)):
        native = [0.001 * (1 + 0.001 * k) for k in range(6)]
        result = {
            "keras_first_s": 0.5,
            "native_first_s": 0.1,
            "keras_s": [n * ratio for n in native],
            "native_s": native,
            "keras_first": [k % 2 == 0 for k in range(6)],
        }
        (answers / str(i)).write_text(
            json.dumps({"status": "ok", "result": result}) + "\n"
        )
    starts = tmp_path / "starts"
    return fake_python(
        tmp_path,
        f"echo start >> {starts}\n"
        f"n=$(( ($(wc -l < {starts}) - 1) % 2 ))\n"
        f"echo '{READY}'\n"
        f"while read line; do cat {answers}/$n; done",
    )


@pytest.mark.parametrize(
    ("budget_s", "repeats"),
    # Every clock reading moves it 100 s: the run's start (0), then per
    # worker a reading of the time left and two around it (100 s taken, all
    # of it the worker's start).  850 s: both planned processes (left 750 at
    # 100, 450 at 400), one more (left 150 at 700), no fourth (left -150).
    # 450 s: the second planned process does not fit (left 50 at 400).
    [(850.0, [0, 1, 2]), (450.0, [0])],
)
def test_the_run_ends_within_its_budget_read_from_its_clock(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    budget_s: float,
    repeats: list[int],
) -> None:
    no_framework(monkeypatch)
    monkeypatch.setenv("HARNESS_PYTHON_TORCH", _steady_worker(tmp_path))
    monkeypatch.setattr(harness.bench.run, "clock", FakeClock(read_s=100.0))
    out = harness.bench.run.run(
        profile(repeats=2, max_repeats=50, cell_budget_s=86_400.0, budget_s=budget_s),
        models=["ffn"],
        paths=TORCH,
        phases=["train"],
        results_dir=tmp_path,
    )
    assert sorted({r.repeat for r in records.read(out)}) == repeats
    plan = read_plan(plan_file(tmp_path, out.stem.removeprefix("run-")))
    assert plan.closing is not None
    assert plan.closing.budget_s == budget_s
    assert list(plan.closing.stops.values()) == ["run_budget"]
    assert plan.closing.spent_s > 0


def test_the_report_says_why_each_cell_stopped_and_the_run_s_time(
    tmp_path: Path,
) -> None:
    plan = _plan()
    recs = _pairs(plan, "ffn", 0.2, seed=7)
    out = tmp_path / "run-r.jsonl"
    for r in recs:
        records.append(out, dataclasses.replace(r, run_id="r"))
    (row,) = overhead_rows(recs)
    assert row["stopped"] == "unfinished"  # the run's plan has not closed
    name = plan.units[0].pair_cell().name()
    (row,) = overhead_rows(recs, {name: "run_budget"})
    assert row["stopped"] == "run_budget"
    closing = Closing(budget_s=600.0, spent_s=612.4, stops={name: "run_budget"})
    assert closing.time_line() == (
        "the run took 10 min 12 s of its 10 min 0 s budget (12 s past it)"
    )
    assert (
        Closing(budget_s=600.0, spent_s=540.0)
        .time_line()
        .endswith("(1 min 0 s to spare)")
    )
    # the report, from the plan written beside the records
    write_plan(plan.model_copy(update={"closing": closing}), plan_file(tmp_path, "r"))
    found = closing_of(out)
    assert found is not None
    (row,) = overhead_rows(records.read(out), found.stops)
    assert row["stopped"] == "run_budget"
    header = summary.header(out, records.read(out), [])
    assert f"time: {closing.time_line()}" in header
    never = {"lenet keras-jax|native-jax train b8": "unstarted"}
    unstarted = Closing(budget_s=1.0, spent_s=1.0, stops=never)
    write_plan(plan.model_copy(update={"closing": unstarted}), plan_file(tmp_path, "r"))
    assert (
        "not timed within the budget: 1 pair cells (jax 1); a larger --budget "
        "times them"
    ) in summary.header(out, records.read(out), [])


@pytest.mark.parametrize(
    ("given", "seconds"),
    [("600", 600.0), ("600s", 600.0), ("10m", 600.0), ("1.5h", 5400.0)],
)
def test_a_budget_is_read_with_its_unit(given: str, seconds: float) -> None:
    assert duration(given) == seconds


@pytest.mark.parametrize("given", ["0", "-5m", "10ms", "ten", "nan", "inf", "8d"])
def test_a_budget_that_is_not_a_time_is_refused_in_one_sentence(given: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="--budget wants a time"):
        duration(given)
