"""The analysis of an ``ops`` run, from records made up here: per-call times
with intervals, keras.ops against native block by block, the share of the
peak (and a time that beats the peak flagged), a busy machine and a failed
search said out loud."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.core import records
from harness.ops import report
from zoo.operators import Case

PEAK = 100e9  # FLOP/s


def _run(folder: Path, verdicts: list[dict], peaks: list[dict] | None = None) -> Path:
    out = folder / "ops-20260101-000000"
    out.mkdir()
    lines = [
        {
            "kind": "run",
            "profile": {"name": "test"},
            "fault": None,
            "host": {"cpu_model": "test"},
            "matmul_peak": {"flops_per_s": PEAK},
        },
        *({"kind": "gate", **v} for v in verdicts),
        *({"kind": "peak", **p} for p in peaks or []),
    ]
    (out / "gate.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return out


def _record(
    out: Path,
    case: Case,
    path: str,
    blocks: list[float],
    *,
    direction: str = "forward",
    repeat: int = 0,
    status: str = "ok",
    contended: bool = False,
) -> None:
    records.append(
        out / "records.jsonl",
        records.Record(
            run_id=out.name,
            profile="ops-test",
            model=case.op,
            path=path,
            framework=path.split("-")[1],
            api=path.split("-", maxsplit=1)[0],
            phase=direction,
            status=status,
            batch_size=case.dims[0],
            equivalence="pass",
            verified=status == "ok",
            repeat=repeat,
            values={"block_s": blocks} if status == "ok" else {},
            summary={"contended": contended} if status == "ok" else {},
            settings={"case": case.label, "dims": case.named},
            error=None if status == "ok" else "held back",
        ),
    )


def _blocks(seconds: float, n: int = 12, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(seconds * (1 + 0.01 * rng.standard_normal(n)))


GEMM = Case("matmul", (512, 512, 512), "square-512")
RELU = Case("relu", (1, 64), "elements-64")


def test_a_slower_keras_side_is_measured_and_listed(tmp_path: Path) -> None:
    out = _run(tmp_path, [])
    large = Case("relu", (4096, 1024), "elements-4194304")
    for case, native in ((RELU, 10e-6), (large, 2e-3)):
        for repeat in range(2):
            _record(
                out,
                case,
                "keras-torch",
                _blocks(1.5 * native, seed=repeat),
                repeat=repeat,
            )
            _record(
                out,
                case,
                "native-torch",
                _blocks(native, seed=9 + repeat),
                repeat=repeat,
            )
    analysis = report.analyse(out)
    small, big = sorted(analysis["overheads"], key=lambda o: o["work"])
    assert big["native_s"] == pytest.approx(2e-3, rel=0.02)
    assert small["ratio"] == pytest.approx(1.5, rel=0.02)
    assert small["extra_s"] == pytest.approx(5e-6, rel=0.05)
    assert small["ratio_low"] > report.SLOWER
    text = report.markdown(analysis)
    # only the large case is listed: a gap of microseconds is the per-call
    # overhead, which has a table of its own
    assert "relu elements-4194304 forward on torch: 1.5" in text
    assert "relu elements-64 forward on torch: 1.5" not in text


def test_equal_sides_are_not_called_slower(tmp_path: Path) -> None:
    out = _run(tmp_path, [])
    _record(out, RELU, "keras-torch", _blocks(10e-6, seed=1))
    _record(out, RELU, "native-torch", _blocks(10e-6, seed=2))
    analysis = report.analyse(out)
    assert (
        analysis["overheads"][0]["ratio_low"]
        < 1.0
        < analysis["overheads"][0]["ratio_high"]
    )
    assert "None: no such case's ratio interval" in report.markdown(analysis)


def test_share_of_peak_and_a_time_that_beats_the_peak(tmp_path: Path) -> None:
    out = _run(tmp_path, [])
    flops = 2 * 512**3
    _record(out, GEMM, "native-torch", _blocks(flops / (0.8 * PEAK)))
    # a call "faster" than the machine's dense rate: a timed region without
    # its sync looks like this, and must be flagged, not reported as a win
    _record(out, GEMM, "native-jax", _blocks(flops / (3 * PEAK)))
    rows = {r["path"]: r for r in report.analyse(out)["rows"]}
    assert rows["native-torch"]["share_of_peak"] == pytest.approx(0.8, rel=0.02)
    assert not rows["native-torch"]["above_peak"]
    assert rows["native-jax"]["above_peak"]
    assert "ABOVE PEAK" in report.markdown(report.analyse(out))


def test_a_busy_machine_and_a_failed_search_are_said(tmp_path: Path) -> None:
    verdict = {
        "op": "matmul",
        "path": "native-torch",
        "ok": False,
        "examples": 7,
        "counterexample": "matmul(m=1, k=2, n=2), seed 0, scale 1",
        "why": "result:y: error 0.5 > allowed 1e-06",
    }
    out = _run(tmp_path, [verdict])
    _record(out, GEMM, "native-torch", [], status="not-timed")
    _record(out, RELU, "native-jax", _blocks(5e-6), contended=True)
    analysis = report.analyse(out)
    text = report.markdown(analysis)
    assert "BUSY MACHINE" in text
    assert "matmul on native-torch disagrees** (not timed)" in text
    assert "matmul(m=1, k=2, n=2)" in text
    row = next(r for r in analysis["rows"] if r["path"] == "native-torch")
    assert row["status"] == "not-timed"
    assert row["call_s"] is None


def test_render_writes_the_tables_and_a_plot_per_operator(tmp_path: Path) -> None:
    out = _run(tmp_path, [])
    for case in (GEMM, Case("matmul", (64, 64, 64), "square-64")):
        for direction in ("forward", "backward"):
            _record(out, case, "keras-jax", _blocks(1e-4), direction=direction)
            _record(out, case, "native-jax", _blocks(9e-5), direction=direction)
    report.render(out)
    assert (out / "ops.md").read_text().startswith("## Operators")
    assert json.loads((out / "ops.json").read_text())["rows"]
    assert (out / "ops-matmul.png").stat().st_size > 1000
    assert report.latest(tmp_path) == out


def test_a_folder_without_a_run_is_refused(tmp_path: Path) -> None:
    (tmp_path / "gate.jsonl").write_text("")
    with pytest.raises(ValueError, match="holds no ops gate lines"):
        report.analyse(tmp_path)


def test_busy_is_judged_over_the_trailing_second_not_one_short_request() -> None:
    from harness.ops.measure import _Trailing

    trailing = _Trailing(seconds=1.0)
    # one 50 ms request whose counters ticked once for another process: noise
    assert trailing.add({"others_cpu": 0.0, "wall_s": 0.05}) is False
    for _ in range(20):
        trailing.add({"others_cpu": 0.0, "wall_s": 0.05})
    assert trailing.add({"others_cpu": 0.4, "wall_s": 0.05}) is False
    # another process taking half a core for a whole second: busy
    for _ in range(20):
        busy = trailing.add({"others_cpu": 0.5, "wall_s": 0.05})
    assert busy is True


def test_a_framework_gemm_faster_than_numpy_sets_the_peak(tmp_path: Path) -> None:
    # NumPy's BLAS need not reach what the hardware does (here OpenBLAS got
    # half of what oneDNN and XLA did): the best read-back GEMM is the peak
    peaks = [
        {"path": "native-tensorflow", "flops_per_s": [2.9 * PEAK, 3.0 * PEAK]},
        {"path": "native-torch", "flops_per_s": [1.5 * PEAK]},
    ]
    out = _run(tmp_path, [], peaks)
    flops = 2 * 512**3
    _record(out, GEMM, "native-jax", _blocks(flops / (2.4 * PEAK)))
    analysis = report.analyse(out)
    assert analysis["matmul_peak_flops"] == 3.0 * PEAK
    assert analysis["peak_by"] == "native-tensorflow"
    (row,) = analysis["rows"]
    assert row["share_of_peak"] == pytest.approx(0.8, rel=0.02)
    assert not row["above_peak"]
    assert "native-tensorflow's own GEMM" in report.markdown(analysis)


def test_a_convolution_beyond_the_peak_is_not_flagged(tmp_path: Path) -> None:
    # Winograd's 3x3 convolutions do fewer multiplications than the direct
    # algorithm the FLOPs count: a share above 1 is no missing wait there
    out = _run(tmp_path, [])
    conv = Case("conv2d", (32, 8, 8, 128, 256, 3, 1), "vgg16-block3_conv1")
    flops = conv.operator.call_flops(conv.named, "forward")
    _record(out, conv, "native-mxnet", _blocks(flops / (2.2 * PEAK)))
    (row,) = report.analyse(out)["rows"]
    assert row["share_of_peak"] == pytest.approx(2.2, rel=0.02)
    assert not row["above_peak"]


def test_harness_report_shows_the_newest_ops_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli.report import _operators

    out = _run(tmp_path, [])
    _record(out, RELU, "keras-jax", _blocks(2e-5))
    _record(out, RELU, "native-jax", _blocks(1e-5))
    report.render(out)
    _operators(tmp_path)
    shown = capsys.readouterr().out
    assert "## Operators (ops-20260101-000000" in shown
    assert "Per-call overhead of keras.ops" in shown
    assert "### relu:" not in shown  # every operator's table stays in ops.md


def test_gate_lines_the_report_cannot_read_are_skipped_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = {
        "kind": "run",
        "profile": {"name": "ops"},
        "matmul_peak": {"flops_per_s": 1e9},
        "host": {},
    }
    bad = [
        {**run, "matmul_peak": {"flops_per_s": "fast"}},  # a string for a rate
        {"kind": "gate", "op": "matmul", "path": "keras-jax"},  # no verdict
        {"kind": "peak", "path": "native-jax", "flops_per_s": []},  # no rate
        {"kind": "peak", "path": "native-jax", "flops_per_s": [float("inf")]},
    ]
    (tmp_path / "gate.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in [*bad, run])
    )
    header, verdicts, _ = report.read(tmp_path)
    assert header == run
    assert verdicts == []
    assert "skipped 4 lines of" in capsys.readouterr().err
    (tmp_path / "gate.jsonl").write_text(json.dumps(bad[0]) + "\n")
    with pytest.raises(ValueError, match=r"holds no ops gate lines \(1 line"):
        report.analyse(tmp_path)
