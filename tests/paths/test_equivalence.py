"""All paths agree on logits, loss and every gradient, and broken layouts are caught.

Hypothesis draws seeds, batch sizes (1 included) and LSTM sequence lengths; a
failure shrinks to a few integers and the assertion prints the replayable case.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from equivalence.check import Case, Checker, ModelReport
from harness.launch import PROJECT_ROOT
from harness.paths import OPTIONAL_FRAMEWORKS, PATHS
from tests.paths.conftest import UNAVAILABLE, require

pytestmark = pytest.mark.paths
NATIVE_PATHS = [p for p, info in PATHS.items() if info.api == "native"]
seeds = st.integers(0, 2**16)


def _explain(report: ModelReport) -> str:
    lines = [f"replay with Case({report.case.describe()})"]
    for path, outcome in report.outcomes.items():
        if outcome["status"] != "ok":
            lines.append(f"{path}: {outcome['status']}: {outcome.get('error')}")
    for pair in report.pairs:
        lines += [
            f"{pair.a} vs {pair.b}: {e.quantity} {e.error:.2e}" for e in pair.failures
        ]
    return "\n".join(lines)


def _assert_all_agree(checker: Checker, case: Case) -> None:
    report = checker.check(case)
    assert report.ok, _explain(report)
    assert set(report.verdicts.values()) == {"pass"}, _explain(report)


@settings(max_examples=8)
@given(seed=seeds, batch=st.integers(1, 64))
def test_ffn_paths_agree(checker: Checker, seed: int, batch: int) -> None:
    _assert_all_agree(checker, Case("ffn", seed, batch))


@settings(max_examples=5)
@given(seed=seeds, batch=st.integers(1, 32))
def test_lenet_paths_agree(checker: Checker, seed: int, batch: int) -> None:
    _assert_all_agree(checker, Case("lenet", seed, batch))


@settings(max_examples=5)
@given(seed=seeds, batch=st.integers(1, 16), seq_len=st.integers(1, 40))
def test_lstm_paths_agree(
    checker: Checker, seed: int, batch: int, seq_len: int
) -> None:
    _assert_all_agree(checker, Case("lstm", seed, batch, seq_len))


@settings(max_examples=2)
@given(seed=seeds, batch=st.integers(1, 4))
def test_vgg16_paths_agree(checker: Checker, seed: int, batch: int) -> None:
    _assert_all_agree(checker, Case("vgg16", seed, batch))


def test_lstm_paths_agree_on_the_full_workload_length(checker: Checker) -> None:
    _assert_all_agree(checker, Case("lstm", 0, 4, 250))


@pytest.mark.parametrize("native", NATIVE_PATHS)
@pytest.mark.parametrize(
    ("model", "fault", "param"),
    [
        ("lenet", "unpermuted-flatten", "fc1/kernel"),
        ("lenet", "conv-hw-swapped", "conv1/kernel"),
        ("vgg16", "conv-hw-swapped", "block1_conv1/kernel"),
        ("lstm", "lstm-gates-swapped", "lstm/kernel"),
    ],
)
def test_a_broken_layout_is_caught(
    checker: Checker, native: str, model: str, fault: str, param: str
) -> None:
    require(checker, native)
    report = checker.check(
        Case(model, 0, 4, 12 if model == "lstm" else None), {native: fault}
    )
    assert not report.ok
    assert report.verdicts[native] == "fail"
    assert all(v == "pass" for p, v in report.verdicts.items() if p != native)
    failing = [p for p in report.pairs if not p.ok]
    assert failing
    assert all(native in (p.a, p.b) for p in failing)
    assert all(f"grad:{param}" in {e.quantity for e in p.failures} for p in failing)


def test_equivalence_cli_names_the_pair_and_parameter() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "equivalence",
            "--models",
            "lenet",
            "--paths",
            "keras-torch,native-torch",
            "--batch-size",
            "2",
            "--fault",
            "native-torch:unpermuted-flatten",
        ],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        "DISAGREE lenet: keras-torch vs native-torch on gradient of fc1/kernel"
        in result.stdout
    )


def test_equivalence_cli_refuses_bad_arguments() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "equivalence", "--fault", "native-torch:typo"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "--fault wants PATH:FAULT" in result.stderr


def test_optional_frameworks_are_available_or_explained(checker: Checker) -> None:
    optional = [p for p, i in PATHS.items() if i.framework in OPTIONAL_FRAMEWORKS]
    missing = [p for p in optional if p not in checker.workers]
    if missing:
        pytest.skip("; ".join(f"{p}: {UNAVAILABLE[p]}" for p in missing))
    assert all(checker.workers[p].platform for p in optional)
