"""The machine's matmul peak: NumPy's probe in a process of its own without
the OpenBLAS variables that pin its kernel, each framework's probe as its
workers run, the best figure taken, every failure a reason.

One real NumPy probe (64 x 64, a hundredth of a second per repeat); every
other probe is a fake runner's answer, so no framework is needed and no test
asserts on a speed."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import harness.bench.run
from harness.core.cells import new_plan
from harness.core.peak import (
    NUMPY_UNSET,
    Probe,
    fraction_of_peak,
    measure_matmul_peak,
    probes,
    read_answer,
    run_probe,
)
from tests.helpers import profile
from workers import peak_probe

PINNED = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "512"}


def _answer(rate: float, kernel: str = "some kernel", **more: Any) -> str:
    return json.dumps(
        {
            "status": "ok",
            "flops_per_s": rate,
            "median_flops_per_s": rate * 0.9,
            "kernel": kernel,
            **more,
        }
    )


class FakeRunner:
    """Stands in for the probe processes: each source's (exit status,
    stdout, stderr), and every call's argv and environment."""

    def __init__(self, said: dict[str, tuple[int, str, str]]) -> None:
        self.said = said
        self.calls: dict[str, tuple[list[str], dict[str, str]]] = {}

    def __call__(
        self, argv: list[str], env: dict[str, str], timeout: float
    ) -> subprocess.CompletedProcess[str]:
        source = argv[argv.index("workers.peak_probe") + 1]
        self.calls[source] = (argv, env)
        code, out, err = self.said[source]
        return subprocess.CompletedProcess(argv, code, out, err)


# --- the real NumPy probe -------------------------------------------------------


@pytest.fixture(scope="module")
def numpy_peak() -> Any:
    """One real NumPy-only peak, tiny and short, run while this process' own
    environment pins OpenBLAS as the host does."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in PINNED.items():
            patch.setenv(name, value)
        peak = measure_matmul_peak(size=64, repeats=2, seconds=0.01)
        parent = {name: os.environ.get(name) for name in PINNED}
    return peak, parent


def test_numpy_probe_runs_without_the_openblas_variables_the_parent_keeps(
    numpy_peak: Any,
) -> None:
    peak, parent = numpy_peak
    assert parent == PINNED  # this process still has them
    numpy = peak["sources"]["numpy"]
    assert numpy["status"] == "ok", numpy
    seen = numpy["environment"]
    assert seen["OPENBLAS_CORETYPE"] is None
    assert seen["OPENBLAS_L2_SIZE"] is None
    assert numpy["python"] == sys.executable


def test_numpy_peak_is_complete_and_names_its_kernel(numpy_peak: Any) -> None:
    peak, _ = numpy_peak
    numpy = peak["sources"]["numpy"]
    assert set(peak["sources"]) == {"numpy"}
    assert peak["best"] == "numpy"
    assert peak["flops_per_s"] == numpy["flops_per_s"]
    assert math.isfinite(peak["flops_per_s"])
    assert peak["flops_per_s"] >= peak["median_flops_per_s"] > 0
    assert (peak["size"], peak["repeats"], numpy["size"]) == (64, 2, 64)
    assert "OMP_NUM_THREADS" in peak["threads"]
    # threadpoolctl names the BLAS NumPy loaded, OpenBLAS its kernel family
    assert numpy["kernel"] == peak["kernel"]
    assert numpy["kernel"] not in ("", "unknown")
    assert numpy["blas"], "threadpoolctl saw no BLAS"
    openblas = [b for b in numpy["blas"] if b["internal_api"] == "openblas"]
    for library in openblas:
        assert library["architecture"] in numpy["kernel"]


def test_the_kernel_is_named_from_threadpoolctl() -> None:
    libraries = [
        {
            "internal_api": "openblas",
            "version": "0.3.29",
            "architecture": "SkylakeX",
            "num_threads": 2,
        }
    ]
    assert peak_probe.blas_kernel(libraries) == "openblas 0.3.29 SkylakeX"
    assert peak_probe.blas_kernel([{"internal_api": "mkl", "version": "2025"}]) == (
        "mkl 2025"
    )
    assert peak_probe.blas_kernel([]) is None


def test_a_framework_that_cannot_be_imported_is_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "mxnet", None)  # import mxnet fails
    answer = peak_probe.probe("mxnet", 0.01, size=8, repeats=1)
    assert answer["status"] == "unavailable"
    assert "mxnet" in answer["error"]


def test_the_probe_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown source"):
        peak_probe.probe("theano", 0.1)
    with pytest.raises(ValueError, match="seconds above 0"):
        peak_probe.probe("numpy", 0.0)
    with pytest.raises(ValueError, match="size from 1 to 8192"):
        peak_probe.probe("numpy", 0.1, size=100_000)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["numpy", "0.01", "--size", "100000"],
            "--size: takes an integer from 1 to 8192",
        ),
        (["numpy", "0.01", "--size", "0"], "--size: takes an integer from 1 to 8192"),
        (["numpy", "0.01", "--repeats", "-1"], "--repeats: takes an integer from 1"),
        (["numpy", "nan"], "seconds: takes a number above 0 up to 3600"),
        (["numpy", "1e300"], "seconds: takes a number above 0 up to 3600"),
        (["numpy", "soon"], "seconds: takes a number above 0 up to 3600"),
    ],
)
def test_the_probe_s_command_line_says_the_range_it_takes(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An argument out of range ends in one line naming the range (exit 2),
    before any matrix is made: ``--size 100000`` once ended in a traceback
    (three 40 GB matrices)."""
    with pytest.raises(SystemExit) as ended:
        peak_probe.main(argv)
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert said in err
    assert "Traceback" not in err


# --- the environments -----------------------------------------------------------


def test_only_the_numpy_probe_loses_the_openblas_variables() -> None:
    parent = {**PINNED, "PATH": "/bin", "KERAS_BACKEND": "jax"}
    threads = {"OMP_NUM_THREADS": "1", "HARNESS_INTRA_OP_THREADS": "1"}
    numpy, torch = probes(["torch"], threads_env=threads, cpus=(1,), env=parent)
    assert (numpy.source, numpy.python, numpy.cpus) == ("numpy", sys.executable, None)
    assert not set(NUMPY_UNSET) & set(numpy.env)
    assert "OMP_NUM_THREADS" not in numpy.env
    # the framework's probe runs as its workers do: every variable, their threads
    assert torch.source == "torch"
    assert {k: torch.env[k] for k in PINNED} == PINNED
    assert {k: torch.env[k] for k in threads} == threads
    assert "KERAS_BACKEND" not in torch.env
    assert torch.cpus == (1,)
    assert torch.argv(1.0, 2048, 5)[-2:] == ["--cpus", "1"]
    assert parent["OPENBLAS_CORETYPE"] == "Haswell"  # untouched


def test_an_unknown_framework_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown framework 'theano'"):
        probes(["theano"], env={})


# --- the best source, and every failure a reason ----------------------------------


def test_the_best_source_is_the_peak() -> None:
    runner = FakeRunner(
        {
            "numpy": (0, _answer(1e11, "openblas 0.3.29 Haswell"), ""),
            "jax": (0, "XLA says hello\n" + _answer(3e11, "xla cpu"), ""),
            "torch": (0, _answer(2e11, "torch mkl AVX512"), ""),
        }
    )
    peak = measure_matmul_peak(
        frameworks=["jax", "torch"],
        threads_env={"OMP_NUM_THREADS": "1"},
        cpus=(1,),
        runner=runner,
    )
    assert peak["best"] == "jax"
    assert peak["flops_per_s"] == 3e11
    assert peak["median_flops_per_s"] == pytest.approx(2.7e11)
    assert peak["kernel"] == "xla cpu"
    assert [s["flops_per_s"] for s in peak["sources"].values()] == [1e11, 3e11, 2e11]
    assert all(s["status"] == "ok" for s in peak["sources"].values())
    # the frameworks start on the workers' CPUs with their threads, NumPy not
    starts = {name: s["start_cpus"] for name, s in peak["sources"].items()}
    assert starts == {"numpy": None, "jax": [1], "torch": [1]}
    assert runner.calls["torch"][1]["OMP_NUM_THREADS"] == "1"
    assert "--cpus" not in runner.calls["numpy"][0]


def test_a_missing_framework_is_skipped_with_its_reason() -> None:
    missing = json.dumps({"status": "unavailable", "error": "No module named 'mxnet'"})
    runner = FakeRunner({"numpy": (0, _answer(1e11), ""), "mxnet": (0, missing, "")})
    lines: list[str] = []
    peak = measure_matmul_peak(frameworks=["mxnet"], runner=runner, log=lines.append)
    assert (peak["best"], peak["flops_per_s"]) == ("numpy", 1e11)
    mxnet = peak["sources"]["mxnet"]
    assert mxnet["status"] == "skipped"
    assert "not installed" in mxnet["reason"]
    assert "No module named 'mxnet'" in mxnet["reason"]
    assert any("mxnet: skipped" in line for line in lines)


BAD = {
    "a crash": (1, "", "Traceback ...\nSegmentation fault", "exited with status 1"),
    "no output": (0, "", "", "printed no answer"),
    "garbage": (0, "hello\nnot json {", "", "printed no answer"),
    "a list": (0, "[1, 2]", "", "printed no answer"),
    "another status": (0, '{"status": "busy"}', "", "answered status 'busy'"),
    "a string rate": (0, _answer(1e9).replace("1000000000.0", '"fast"'), "", "rate"),
    "a NaN rate": (0, _answer(float("nan")), "", "no positive finite rate"),
    "a negative rate": (0, _answer(-1.0), "", "no positive finite rate"),
    "no kernel": (0, _answer(1e9, kernel=" "), "", "did not name its kernel"),
    "an impossible rate": (0, _answer(1e300), "", "of at most 1e+16 FLOP/s"),
    "a 7 MB kernel": (0, _answer(1e9, kernel="k" * 7_000_000), "", "7,000,000 char"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_wrong_answer_is_a_reason_not_a_crash(case: str) -> None:
    code, out, err, reason = BAD[case]
    entry = read_answer("jax", code, out, err)
    assert set(entry) == {"status", "reason"}
    assert entry["status"] == "skipped"
    runner = FakeRunner({"numpy": (0, _answer(1e11), ""), "jax": (code, out, err)})
    peak = measure_matmul_peak(frameworks=["jax"], runner=runner)
    jax = peak["sources"]["jax"]
    assert jax["status"] == "skipped"
    assert reason in jax["reason"]
    assert (peak["best"], peak["flops_per_s"]) == ("numpy", 1e11)


def test_a_long_failure_is_cut_short() -> None:
    entry = read_answer("torch", 1, "", "x" * 10_000 + " the end")
    assert entry["reason"].endswith("the end")
    assert len(entry["reason"]) < 400


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (subprocess.TimeoutExpired(["python"], 1.0), "took over"),
        (FileNotFoundError("no such interpreter"), "cannot start"),
    ],
)
def test_a_probe_that_hangs_or_cannot_start_is_a_reason(
    error: Exception, reason: str
) -> None:
    def runner(
        argv: list[str], env: dict[str, str], timeout: float
    ) -> subprocess.CompletedProcess[str]:
        raise error

    entry = run_probe(Probe("tensorflow", "/no/python", {}), 0.1, 64, 1, runner)
    assert entry["status"] == "skipped"
    assert reason in entry["reason"]
    assert (entry["python"], entry["start_cpus"]) == ("/no/python", None)


def test_no_source_at_all_is_no_peak() -> None:
    runner = FakeRunner({"numpy": (1, "", "boom")})
    peak = measure_matmul_peak(runner=runner)
    assert (peak["flops_per_s"], peak["best"], peak["kernel"]) == (None, None, None)
    assert "boom" in peak["sources"]["numpy"]["reason"]


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="size >= 1"):
        measure_matmul_peak(size=0)


# --- harness run's peak: the run's frameworks, its workers' threads ----------------


def _plan(**changes: Any) -> Any:
    paths = ["keras-jax", "native-torch", "native-mxnet"]
    return new_plan(
        "r1",
        profile("smoke", **changes),
        models=["ffn"],
        paths=paths,
        phases=["infer"],
        keys={"ffn": dict.fromkeys(paths, "k")},
    )


@pytest.mark.parametrize(
    ("frameworks", "probed"), [(True, ["jax", "torch", "mxnet"]), (False, [])]
)
def test_a_run_probes_the_frameworks_it_measures_once(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    frameworks: bool,
    probed: list[str],
) -> None:
    asked: list[dict[str, Any]] = []

    def measure(**kw: Any) -> dict[str, Any]:
        asked.append(kw)
        return {"flops_per_s": 2.0, "best": "numpy", "sources": {}}

    monkeypatch.setattr(harness.bench.run, "measure_matmul_peak", measure)
    plan = _plan(peak_frameworks=frameworks)
    first = harness.bench.run.matmul_peak(tmp_path, plan)
    assert harness.bench.run.matmul_peak(tmp_path, plan) == first  # kept
    (kw,) = asked
    assert kw["frameworks"] == probed
    assert kw["seconds"] == 0.1  # the smoke profile's peak_s
    assert kw["threads_env"]["OMP_NUM_THREADS"] == "1"  # the workers' threads
    assert kw["threads_env"]["HARNESS_INTRA_OP_THREADS"] == "1"


def test_peak_frameworks_keeps_the_profile_digest() -> None:
    assert profile("smoke", peak_frameworks=True).digest() == profile("smoke").digest()
    assert profile("smoke", peak_frameworks=False).digest() != profile("smoke").digest()


# --- the fraction --------------------------------------------------------------


def test_fraction_of_peak_arithmetic() -> None:
    # 50 GFLOP in 2 s is 25 GFLOP/s, a quarter of a 100 GFLOP/s peak.
    assert fraction_of_peak(50e9, 2.0, 100e9) == pytest.approx(0.25)
    assert fraction_of_peak(0.0, 1.0, 1e9) == 0.0


@pytest.mark.parametrize(("seconds", "peak"), [(0.0, 1e9), (1.0, 0.0), (-1.0, 1e9)])
def test_fraction_of_peak_rejects_zero_time_or_peak(
    seconds: float, peak: float
) -> None:
    with pytest.raises(ValueError, match="positive, finite time and peak"):
        fraction_of_peak(1e9, seconds, peak)
