from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.__main__ import main
from harness.core import records
from harness.report.tables import compare_report
from tests.helpers import record

PATHS = ("keras-torch", "native-torch", "keras-jax", "native-jax")
SLOW_PATH = "native-jax"


def _run_file(out: Path, seed: int, slowdown: dict[str, float], n: int = 7) -> Path:
    """Every path and phase with ``n`` repeats of ~2% lognormal noise around a
    per-path median, times the path's slowdown factor."""
    rng = np.random.default_rng(seed)
    for i, path in enumerate(PATHS):
        for phase in ("train", "infer"):
            base = 0.002 * (1 + i) * (3 if phase == "train" else 1)
            samples = base * slowdown.get(path, 1.0) * rng.lognormal(0.0, 0.02, n)
            for repeat, sample in enumerate(samples):
                timed = record(
                    path,
                    phase,
                    seconds=float(sample),
                    first=1.0,
                    repeat=repeat,
                    model="lenet",
                )
                records.append(out, timed)
    return out


def test_an_injected_slowdown_is_flagged_and_nothing_else(tmp_path: Path) -> None:
    old = _run_file(tmp_path / "run-old.jsonl", seed=10, slowdown={})
    new = _run_file(tmp_path / "run-new.jsonl", seed=11, slowdown={SLOW_PATH: 1.2})
    rows = json.loads(compare_report(old, new, "json"))
    assert len(rows) == 2 * len(PATHS)
    verdicts = {(r["path"], r["phase"]): r["verdict"] for r in rows}
    for (path, phase), verdict in verdicts.items():
        expected = "slower" if path == SLOW_PATH else "same"
        assert verdict == expected, (path, phase, rows)
    slow = [r for r in rows if r["path"] == SLOW_PATH]
    assert all(r["change_pct"] == pytest.approx(20, abs=5) for r in slow)
    assert all(r["p_value"] < 0.05 for r in slow)
    # The answer first: how many cells changed, before the table.
    text = compare_report(old, new, "markdown")
    assert text.index("## The answer: what changed") < text.index("## change per cell")
    assert "- cells that changed (p < 0.05, each cell alone): 2 slower, of" in text


def test_too_few_samples_are_said_so(tmp_path: Path) -> None:
    old = _run_file(tmp_path / "run-old.jsonl", seed=1, slowdown={}, n=3)
    new = _run_file(tmp_path / "run-new.jsonl", seed=2, slowdown={SLOW_PATH: 2}, n=3)
    text = compare_report(old, new, "table")
    assert "too few samples" in text
    assert "smallest possible p-value is 0.1" in text
    assert "slower" not in text


def _blocks_run(out: Path, shifts: list[float]) -> Path:
    """Training records of one path, one per process, each with 15 blocks:
    the process' own level (``shifts``, what the host's load does to a
    process) times a small noise of its blocks."""
    rng = np.random.default_rng(len(shifts))
    for repeat, shift in enumerate(shifts):
        blocks = [0.01 * shift * float(x) for x in rng.lognormal(0.0, 0.002, 15)]
        records.append(
            out,
            record(
                "keras-torch",
                repeat=repeat,
                values={"step_s": blocks, "partner": "native-torch"},
                summary={"median_step_s": float(np.median(blocks))},
            ),
        )
    return out


def test_a_process_blocks_count_once_so_process_levels_are_not_a_change(
    tmp_path: Path,
) -> None:
    # Process levels as the host's load draws them, a little higher on the
    # new side by chance: 45 pooled blocks a side would call that slower at
    # p < 1e-6; three processes a side cannot say anything.
    old = _blocks_run(tmp_path / "run-old.jsonl", [0.98, 0.99, 1.0])
    new = _blocks_run(tmp_path / "run-new.jsonl", [1.0, 1.01, 1.02])
    (row,) = json.loads(compare_report(old, new, "json"))
    assert (row["n_old"], row["n_new"]) == (3, 3)
    assert row["verdict"] == "too few samples"
    # four processes a side, every new one 10% slower: that is a change
    old4 = _blocks_run(tmp_path / "run-old4.jsonl", [0.99, 1.0, 1.01, 1.0])
    new4 = _blocks_run(tmp_path / "run-new4.jsonl", [1.09, 1.1, 1.11, 1.1])
    (row,) = json.loads(compare_report(old4, new4, "json"))
    assert row["verdict"] == "slower"


def test_markdown_compare_is_a_github_table(tmp_path: Path) -> None:
    old = _run_file(tmp_path / "run-old.jsonl", seed=10, slowdown={})
    new = _run_file(tmp_path / "run-new.jsonl", seed=11, slowdown={SLOW_PATH: 1.2})
    text = compare_report(old, new, "markdown")
    assert "| model " in text
    assert "|---" in text


def test_cli_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = _run_file(tmp_path / "run-old.jsonl", seed=10, slowdown={})
    new = _run_file(tmp_path / "run-new.jsonl", seed=11, slowdown={SLOW_PATH: 1.2})
    assert main(["report", "--compare", str(old), str(new)]) == 0
    assert "slower" in capsys.readouterr().out


@pytest.mark.parametrize("broken", ["missing", "empty", "torn"])
def test_unreadable_files_give_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], broken: str
) -> None:
    good = _run_file(tmp_path / "run-good.jsonl", seed=1, slowdown={})
    bad = tmp_path / "run-bad.jsonl"
    if broken == "empty":
        bad.write_text("")
    elif broken == "torn":
        bad.write_text('{"model": "half a rec')
    assert main(["report", "--compare", str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    if broken == "torn":  # the torn last line is named first, as every reader does
        warning, err = err.split("\n", 1)
        assert warning == (
            f"warning: skipped line 1 of {bad}, the last: it was cut short (a "
            "write that did not finish, e.g. a crash)"
        )
    assert err.startswith("error: ")
    assert err.count("\n") == 1
    assert "Traceback" not in err
    assert str(bad) in err
    assert main(["report", str(bad)]) == 2
    assert str(bad) in capsys.readouterr().err


def test_files_without_a_common_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "run-old.jsonl"
    records.append(old, record("keras-torch"))
    new = tmp_path / "run-new.jsonl"
    records.append(new, record("keras-torch", batch_size=16))
    assert main(["report", "--compare", str(old), str(new)]) == 2
    assert "share no timed cell" in capsys.readouterr().err
