"""``harness.explain.decompose`` and the framework-free half of ``harness explain``:
parts from interleaved blocks, the profiled extra kernels, the cells of a
run's lines, the Markdown, and ``workers.timing.time_interleaved`` for more
than two sides.  Synthetic data with known parts: what is put in must come
out, and inputs that cannot be taken apart are refused."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.core.placement import of_profile
from harness.explain import decompose, measure
from workers.timing import Interleaved, time_interleaved

# Known parts, seconds per step: native, then what each level adds above it.
NATIVE, LAYERS, FIT_LOOP, CONVERSION = 300e-6, 500e-6, 200e-6, 50e-6
LEVELS = (
    NATIVE + LAYERS + FIT_LOOP + CONVERSION,  # fit on NumPy
    NATIVE + LAYERS + FIT_LOOP,  # resident
    NATIVE + LAYERS,  # step
    NATIVE,
)
PATHS = ["keras-torch", "keras-torch-resident", "keras-torch-step", "native-torch"]


def _processes(
    levels: tuple[float, ...] = LEVELS,
    n: int = 4,
    blocks: int = 12,
    noise: float = 0.02,
    seed: int = 0,
) -> list[list[list[float]]]:
    """Blocks of every level; each block shares one factor (the host's
    moment), each process another, each time a little noise of its own."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        process = rng.lognormal(0, 0.05)
        rows = []
        for _ in range(blocks):
            moment = process * rng.lognormal(0, 0.1)
            rows.append(
                [t * moment * rng.lognormal(0, noise) for t in levels],
            )
        out.append(rows)
    return out


def _within(found: dict[str, float], truth: float, slack: float) -> bool:
    return found["low"] - slack <= truth <= found["high"] + slack


def test_known_parts_come_out_with_intervals_that_hold_them() -> None:
    found = decompose.parts(_processes())
    us = decompose.US
    parts = found["parts"]
    assert set(parts) == {
        "native",
        "layers and optimizer",
        "fit loop",
        "input conversion",
    }
    # The shared factors move each part by up to ~10% per block; the HL of
    # many blocks lands close, and the intervals hold the truth.
    assert _within(parts["native"], NATIVE * us, 0.1 * NATIVE * us)
    assert _within(parts["layers and optimizer"], LAYERS * us, 0.1 * LAYERS * us)
    assert _within(parts["fit loop"], FIT_LOOP * us, 0.1 * FIT_LOOP * us)
    assert _within(parts["input conversion"], CONVERSION * us, 0.2 * CONVERSION * us)
    assert abs(found["closure"]) < 0.05
    assert found["ratio"]["low"] <= sum(LEVELS[:1]) / NATIVE <= found["ratio"]["high"]
    assert found["processes"] == 4
    assert found["blocks"] == 48


def test_a_level_that_adds_nothing_gets_an_interval_around_zero() -> None:
    # Deliberately wrong input to the reading of a part: resident data that
    # saves nothing must not show a conversion cost.
    levels = (LEVELS[1], LEVELS[1], LEVELS[2], LEVELS[3])
    conversion = decompose.parts(_processes(levels))["parts"]["input conversion"]
    assert conversion["low"] <= 0 <= conversion["high"]


def test_a_slower_native_path_shows_as_a_negative_part_not_a_hidden_one() -> None:
    # Keras' step faster than native: the part is negative, and the parts
    # still add up to the Keras step.
    levels = (LEVELS[0], LEVELS[1], NATIVE, NATIVE * 1.5)
    found = decompose.parts(_processes(levels))
    assert found["parts"]["layers and optimizer"]["high"] < 0
    assert abs(found["closure"]) < 0.05


def test_extra_kernels_come_out_of_layers_and_optimizer() -> None:
    extra = decompose.extra_kernels(
        _profile_answer(step_kernel=0.6e-3, native_kernel=0.5e-3)
    )
    assert extra is not None
    assert extra.value == pytest.approx(100.0, rel=0.05)
    found = decompose.parts(_processes(), extra)
    layers = found["parts"]["layers and optimizer"]
    assert layers["us"] == pytest.approx(LAYERS * 1e6 - extra.value, rel=0.1)
    assert found["parts"]["extra kernels"]["us"] == extra.value
    # The two intervals are combined: wider than either alone.
    assert layers["high"] - layers["low"] > extra.high - extra.low


def test_equal_kernel_times_give_extra_kernels_around_zero() -> None:
    extra = decompose.extra_kernels(
        _profile_answer(step_kernel=0.5e-3, native_kernel=0.5e-3)
    )
    assert extra is not None
    assert extra.low <= 0 <= extra.high


@pytest.mark.parametrize(
    "bad",
    [[1e-3, 1e-3, 1e-3], [1e-3, 1e-3, -1e-3, 1e-3], [1e-3, 1e-3, 0.0, 1e-3]],
    ids=["three-levels", "negative", "zero"],
)
def test_a_block_that_cannot_be_taken_apart_is_refused(bad: list[float]) -> None:
    processes = _processes()
    processes[0][0] = bad
    with pytest.raises(ValueError, match="four positive times"):
        decompose.parts(processes)


def _profile_answer(
    step_kernel: float, native_kernel: float, rounds: int = 5
) -> dict[str, Any]:
    rng = np.random.default_rng(1)
    kernels = [
        [
            1.1 * step_kernel,
            1.05 * step_kernel,
            step_kernel * rng.lognormal(0, 0.02),
            native_kernel * rng.lognormal(0, 0.02),
        ]
        for _ in range(rounds)
    ]
    return {
        "paths": PATHS,
        "profiler": "test profiler",
        "wall_s": [list(LEVELS) for _ in kernels],  # as timed: no slowdown
        "kernel_s": kernels,
        "op_names": [
            ["mm", "add", "where"],
            ["mm", "add"],
            ["mm", "add"],
            ["mm", "addmm", "add"],
        ],
        "op_s": [[3e-4, 2e-4, 1e-5], [3e-4, 2e-4], [3e-4, 2e-4], [2e-4, 3e-4, 1e-4]],
        "op_calls": [[8, 6, 1], [8, 6], [8, 6], [5, 3, 6]],
        "notes": [None, None, None, "a note"],
    }


def _lines() -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [{"kind": "host", "host": {}, "profile": "smoke"}]
    base = {"model": "ffn", "framework": "torch", "phase": "train", "main_batch": 32}
    for batch, scale in ((8, 0.5), (32, 1.0)):
        per_sample = [t * 0.2 * batch / 32 for t in LEVELS]
        levels = tuple(
            0.8 * t * scale + c for t, c in zip(LEVELS, per_sample, strict=True)
        )
        for process in _processes(levels, n=3, blocks=6, seed=batch):
            lines.append(
                {
                    **base,
                    "kind": "levels",
                    "batch": batch,
                    "answer": {"paths": PATHS, "blocks_s": process},
                    "resources": {"contended": batch == 8},
                    "unverified": batch == 8,
                }
            )
    lines.append(
        {
            **base,
            "kind": "profile",
            "batch": 32,
            "answer": _profile_answer(6e-4, 2.5e-4),
        }
    )
    lines.append({**base, "kind": "failure", "batch": 32, "task": "levels", "why": "x"})
    return lines


def test_cells_from_a_runs_lines_hold_parts_sweep_and_profile() -> None:
    (cell,) = decompose.cells(_lines())
    assert (cell["model"], cell["framework"], cell["phase"], cell["batch"]) == (
        "ffn",
        "torch",
        "train",
        32,
    )
    assert list(cell["parts"]) == list(decompose.PARTS)
    fits = cell["sweep"]["fits"]
    assert set(fits) == set(PATHS)
    assert all(f["per_sample_us"] > 0 for f in fits.values())
    profile = cell["profile"]
    assert profile["keras-torch"]["kernel_share"] == pytest.approx(
        1.1 * 6e-4 / LEVELS[0]
    )
    assert profile["one_sided"] == {
        "keras only": [["where", pytest.approx(10.0)]],
        "native only": [["addmm", pytest.approx(300.0)]],
    }
    assert profile["native-torch"]["note"] == "a note"


def test_a_run_renders_json_markdown_and_a_plot(tmp_path: Path) -> None:
    results, tmp_path = tmp_path, tmp_path / "explain-20261123-010203"
    tmp_path.mkdir()
    (tmp_path / "explain.jsonl").write_text(
        "\n".join(json.dumps(line) for line in _lines()) + "\n{cut short"
    )
    found = measure.render(tmp_path)
    assert len(found) == 1
    saved = json.loads((tmp_path / "explain.json").read_text())
    assert saved["cells"][0]["parts"].keys() == found[0]["parts"].keys()
    assert saved["not_measured"][0]["why"] == "x"
    text = (tmp_path / "explain.md").read_text()
    assert "### ffn train on torch (batch 32)" in text
    assert "| input conversion |" in text
    assert "The parts sum to" in text
    assert "fixed cost Keras adds falls below 10%" in text
    assert "Operators keras only: where" in text
    assert "- not measured: ffn torch train 32: x" in text
    assert "**UNVERIFIED**: measured with --allow-unverified" in text
    assert "**BUSY MACHINE**: other processes took CPU time during 3 of the 7" in text
    assert (tmp_path / "explain-ffn-torch.png").stat().st_size > 0
    assert measure.latest(results) == tmp_path
    # A second run of another model: the report shows both, each the newest.
    newer = results / "explain-20261123-020000"
    newer.mkdir()
    other = [
        {**line, "model": "lenet"} if "model" in line else line for line in _lines()
    ]
    (newer / "explain.jsonl").write_text("\n".join(json.dumps(x) for x in other))
    measure.render(newer)
    (results / "explain-20261123-030000").mkdir()  # no analysis: passed over
    shown = measure.newest_cells(results)
    assert [(run.name, c["model"]) for run, c in shown] == [
        ("explain-20261123-010203", "ffn"),
        ("explain-20261123-020000", "lenet"),
    ]


def test_sweep_sizes_hold_the_batch_and_smaller_ones() -> None:
    assert measure.sweep_sizes(64) == [1, 4, 16, 64]
    assert measure.sweep_sizes(128) == [2, 8, 32, 128]
    assert measure.sweep_sizes(1) == [1]


# --- interleaving more than two sides ---------------------------------------------


def test_every_side_runs_once_per_block_in_a_drawn_order() -> None:
    ran: list[int] = []
    runs = [lambda n, k=k: ran.extend([k] * n) for k in range(4)]

    def interleave() -> Interleaved:
        return time_interleaved(
            runs,
            "train",
            steps=1,
            batches_per_round=1,
            window_s=0,
            min_blocks=30,
            max_blocks=30,
            warmup_runs=0,
            seed=3,
        )

    measured = interleave()
    assert len(measured.blocks_s) == len(measured.orders) == 30
    assert all(sorted(order) == [0, 1, 2, 3] for order in measured.orders)
    assert len({tuple(o) for o in measured.orders}) > 5  # orders vary
    timed = ran[4:]  # after the four first steps
    assert timed == [k for order in measured.orders for k in order]
    assert interleave().orders == measured.orders  # the same seed, the same orders


def test_a_stretched_side_is_measured_slower() -> None:
    def work(n: int) -> None:
        sum(range(2000 * n))

    measured = time_interleaved(
        [work, work, work],
        "train",
        steps=2,
        batches_per_round=1,
        window_s=0,
        min_blocks=15,
        max_blocks=15,
        warmup_runs=1,
        seed=0,
        stretch=[1.0, 1.0, 2.0],
    )
    ratios = [row[2] / row[0] for row in measured.blocks_s]
    assert math.isclose(float(np.median(ratios)), 2.0, rel_tol=0.3)


@pytest.mark.parametrize(
    ("runs", "stretch"), [(0, None), (3, [1.0, 1.0])], ids=["no-side", "stretches"]
)
def test_interleaving_needs_a_side_and_a_stretch_each(
    runs: int, stretch: list[float] | None
) -> None:
    with pytest.raises(ValueError, match="one or more sides and one stretch per side"):
        time_interleaved(
            [lambda n: None] * runs,
            "train",
            steps=1,
            batches_per_round=1,
            window_s=0,
            min_blocks=1,
            max_blocks=1,
            warmup_runs=0,
            seed=0,
            stretch=stretch,
        )


def test_a_profile_the_profiler_slowed_is_not_taken_apart() -> None:
    # Deliberately wrong input to the kernel split: a step level whose
    # profiled wall time is three times its timed time.
    lines = _lines()
    profile = lines[-2]["answer"]
    for row in profile["wall_s"]:
        row[2] = 4 * LEVELS[2]
    (cell,) = decompose.cells(lines)
    assert "extra kernels" not in cell["parts"]
    assert cell["profile"]["distorted"][0].startswith("keras-torch-step ")
    assert cell["profile"]["keras-torch-step"]["profiler_slowdown"] > 2.5
    assert cell["profile"]["keras-torch"]["profiler_slowdown"] < 1.5
    text = measure.markdown([cell])
    assert "The profiler slowed keras-torch-step " in text


def test_a_framework_keras_does_not_run_on_is_profiled_only() -> None:
    answer = _profile_answer(5e-4, 5e-4)
    answer = {
        key: (value[2:] if isinstance(value, list) else value)
        for key, value in answer.items()
    }
    answer["paths"] = ["native-mxnet", "native-mxnet-hybrid"]
    answer["kernel_s"] = [row[2:] for row in _profile_answer(5e-4, 5e-4)["kernel_s"]]
    answer["wall_s"] = [[2 * k for k in row] for row in answer["kernel_s"]]
    line = {
        "kind": "profile",
        "model": "ffn",
        "framework": "mxnet",
        "phase": "train",
        "batch": 32,
        "main_batch": 32,
        "answer": answer,
    }
    (cell,) = decompose.cells([line])
    assert "parts" not in cell
    assert cell["sweep"] == {}
    # Swept too: each path's line, no break-even (no Keras level).
    swept = [
        {
            **line,
            "kind": "levels",
            "batch": batch,
            "answer": {
                "paths": answer["paths"],
                "blocks_s": [[2e-4 + 1e-6 * batch, 1e-4 + 1e-6 * batch]] * 3,
            },
        }
        for batch in (8, 32)
    ]
    (cell,) = decompose.cells([*swept, line])
    assert "parts" not in cell
    assert set(cell["sweep"]["fits"]) == {"native-mxnet", "native-mxnet-hybrid"}
    assert "breakeven_batch" not in cell["sweep"]
    assert "| native-mxnet-hybrid |" in measure.markdown([cell])
    assert set(cell["profile"]) == {"native-mxnet", "native-mxnet-hybrid", "profiler"}
    text = measure.markdown([cell])
    assert "| native-mxnet | 50% |" in text


class _FakeWorker:
    """Answers every request with ``answer``."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def call(self, request: Any, timeout: float) -> Any:
        from workers.launch import Reply

        return Reply("ok", answer=self.answer, resources={"others_cpu": 0.0})


def test_a_level_that_diverged_is_recorded_as_a_failure_not_a_timing(
    tmp_path: Path,
) -> None:
    from harness.core.profiles import get_profile
    from workers.messages import Levels, LevelsAnswer

    lines: list[dict[str, Any]] = []
    cell = measure._Cell(
        get_profile("smoke"),
        model="ffn",
        framework="torch",
        levels=PATHS,
        cache=tmp_path,
        where=of_profile(get_profile("smoke")),
        write=lines.append,
        log=lambda line: None,
    )
    request = Levels(
        model="ffn", weights="w", data="d", phase="train", steps=1, window_s=0
    )

    def answer(nonfinite: list[str | None]) -> LevelsAnswer:
        return LevelsAnswer(
            paths=PATHS,
            first_s=[1.0] * 4,
            blocks_s=[list(LEVELS)],
            orders=[[0, 1, 2, 3]],
            nonfinite=nonfinite,
            final_loss=[1.0] * 4,
        )

    cell._call(_FakeWorker(answer([None] * 4)), request, "train", 32)
    diverged = [None, None, "loss nan after the last timed run", None]
    cell._call(_FakeWorker(answer(diverged)), request, "train", 32)
    assert [line["kind"] for line in lines] == ["levels", "failure"]
    assert lines[1]["why"] == "diverged: loss nan after the last timed run"
    assert lines[0]["resources"]["contended"] is False
