"""What the float64 judgement changes for a user, seen through real workers:
a path that cannot start fails the check, blame does not depend on which
paths were chosen, the LSTM is checked at a short length too, and every path
says whether it repeats its own bits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from equivalence.check import WORKER_ENV, Case, Checker
from equivalence.reference import IMPLEMENTATIONS
from native.faults import FAULTS
from tests.paths.conftest import require
from tests.tiers import Sizes, full_only
from workers.launch import PROJECT_ROOT, Worker
from workers.messages import Evaluate
from zoo.arrays import load_npz
from zoo.models import get_spec
from zoo.weights import weights_file

pytestmark = pytest.mark.paths


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "equivalence", *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.sized
def test_a_native_path_that_crashes_at_start_up_fails_the_check(size: Sizes) -> None:
    full_only(
        size,
        "a second python -m equivalence run end to end, a path crashing at "
        "start-up (18 s); the fast tier runs the command once "
        "(test_equivalence.py) and a worker dying at start in test_launch.py",
    )
    # An environment that makes native PyTorch's own code raise at import, as
    # a source fault would (the float64 reference sets its own dtype).
    result = _cli(
        "--models", "ffn", "--paths", "native-jax,native-torch",
        "--steps", "0", "--epochs", "0", "--batch-size", "2",
        env={"HARNESS_NATIVE_DTYPE": "bfloat16"},
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert "all paths agree" not in result.stdout
    assert "FAILED native-torch" in result.stdout
    rows = [line.split() for line in result.stdout.splitlines()]
    assert ["native-torch", *["-"] * 7, "error"] in rows, result.stdout


def test_blame_does_not_depend_on_the_paths_chosen(checker: Checker) -> None:
    # Two paths, one faulty: pairwise, each disagrees with the only other one
    # and both would fail; against float64 only the faulty one does, and it
    # is localized against float64 at the fault's own layer.
    with Checker(["keras-jax", "native-jax"], references_from=checker) as two:
        report = two.check(Case("lenet", 0, 4), {"native-jax": "missing-bias"})
    assert report.verdicts == {"keras-jax": "pass", "native-jax": "fail"}
    localization = report.localizations["native-jax"]
    assert localization.reference == "native-torch float64"
    assert localization.first == FAULTS["missing-bias"].target(get_spec("lenet"))


@pytest.mark.sized
def test_the_lstm_is_checked_short_and_long_and_repeats_its_bits(size: Sizes) -> None:
    full_only(
        size,
        "a second python -m equivalence run end to end, on the LSTM (17 s); "
        "the fast tier runs the command once (test_equivalence.py)",
    )
    result = _cli(
        "--models", "lstm", "--paths", "native-torch,native-jax",
        "--steps", "0", "--epochs", "0", "--batch-size", "2",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "== model='lstm', seed=0, batch_size=2 ==" in result.stdout
    assert "== model='lstm', seed=0, batch_size=2, seq_len=12 ==" in result.stdout
    assert result.stdout.count("identical") >= 4
    assert "all paths agree" in result.stdout


@pytest.mark.sized
def test_a_kl_divergence_whose_terms_cancel_passes_native_mxnet(
    checker: Checker, size: Sizes
) -> None:
    """Finding 08de0aec85 (docs/results/kinds.md): native MXNet's KL loss at
    the third step, 4.8e-5 off where the three float32 baselines erred
    alike and less, failed at m = 16 until the perturbed run added the
    rounding of the loss' terms (``zoo.losses.PAIRED``'s comment)."""
    full_only(
        size,
        "a python -m equivalence run end to end on the finding's case (35 s); "
        "the perturbed loss itself is held in tests/native/test_losses.py",
    )
    require(checker, "native-mxnet")
    table = PROJECT_ROOT / "docs" / "results" / "losses" / "kl_cancelling.toml"
    result = _cli(
        "--model", str(table), "--paths", "native-torch,native-mxnet",
        "--seed", "3", "--batch-size", "1", "--steps", "3", "--epochs", "0",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all paths agree" in result.stdout


@pytest.mark.parametrize(
    ("implementation", "fault", "steps"),
    [("native-torch", "missing-bias", 0), ("native-jax", "adam-eps-inside-sqrt", 1)],
)
def test_a_fault_in_a_reference_implementation_is_named_and_the_rest_judged(
    checker: Checker, implementation: str, fault: str, steps: int
) -> None:
    # A fault in the code one float64 reference runs, as an edit would put it
    # there: in its path and in its float64 and float32 runs.  The other two
    # float64 runs outvote it; it is named and localized, and every path is
    # still judged against the majority.
    report = checker.check(
        Case("lenet", 0, 4, steps=steps), source_faults={implementation: fault}
    )
    target = FAULTS[fault].target(get_spec("lenet"))
    assert report.reference_error is None
    assert report.vote is not None
    assert report.vote.odd == implementation
    assert report.vote.reference not in (None, implementation)
    assert report.vote.sentence is not None
    assert f"{implementation}'s model code is wrong" in report.vote.sentence
    assert report.odd_localization is not None
    assert report.odd_localization.first == target
    assert report.verdicts == {
        p: "fail" if p == implementation else "pass" for p in checker.workers
    }
    assert report.localizations[implementation].first == target


@pytest.mark.sized
def test_a_path_stands_in_for_its_float32_baseline_bit_for_bit(
    checker: Checker, tmp_path: Path, size: Sizes
) -> None:
    full_only(
        size,
        "that the reused float32 baselines are the bits of workers of their "
        "own (17 s, three fresh workers): the full tier runs after any change "
        "to native/ or equivalence/",
    )
    # The checker takes an implementation's float32 baseline from its own
    # path's worker (``Checker._worker``, ``equivalence.check._reuse``):
    # sound only because a worker of its own, as a baseline would otherwise
    # have, computes the very same bits.
    report = checker.check(Case("lenet", 0, 4, steps=1))
    weights = weights_file(get_spec("lenet"), 0, checker.work)
    data = checker.work / "batches.npz"
    for impl in IMPLEMENTATIONS:
        out = tmp_path / f"{impl}.npz"
        request = Evaluate(
            model="lenet", weights=str(weights), data=str(data), out=str(out)
        )
        env = {**WORKER_ENV, "HARNESS_NATIVE_DTYPE": "float32"}
        with Worker(impl, env=env, deterministic=True) as alone:
            reply = alone.call(request, 600)
        assert reply.ok, reply.error
        own = load_npz(out)
        assert own.keys() == report.evaluated[impl].keys()
        for key, value in own.items():
            assert np.array_equal(value, report.evaluated[impl][key]), (impl, key)


def test_a_case_checked_again_asks_each_worker_only_what_is_new(
    checker: Checker, monkeypatch: pytest.MonkeyPatch
) -> None:
    everyone = {**checker.references, **checker.workers}
    names = {id(worker): name for name, worker in everyone.items()}
    asked: list[tuple[str, str]] = []
    real = Worker.call

    def counting(self: Worker, request: object, *args: object) -> object:
        asked.append((names.get(id(self), "?"), request.TASK))  # type: ignore[attr-defined]
        return real(self, request, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Worker, "call", counting)
    case = Case("ffn", 3, 2, steps=1)
    first = checker.check(case, {"native-torch": "missing-bias"})
    assert {name for name, _ in asked} >= set(checker.workers) | {
        f"{impl}.float64" for impl in IMPLEMENTATIONS
    }
    asked.clear()
    again = checker.check(case, {"native-jax": "missing-bias"})
    # The same batches: only the faulty path is asked its evaluation and
    # trajectory again (faulty, then as native-jax's float32 run), and the
    # path faulty before (its localization's faulty forward pass came last
    # and made it forget); besides, the tapped forward passes that
    # localizing native-jax needs.
    computed = {name for name, task in asked if task != "activations"}
    assert computed == {"native-jax", "native-torch"}, asked
    assert first.vote is not None
    assert again.vote is not None
    assert again.vote.reference == first.vote.reference
    assert again.verdicts["native-jax"] == "fail"
    assert again.verdicts["native-torch"] == "pass"
    asked.clear()
    checker.check(case)
    # after its fault native-jax is asked anew, everyone else is not
    assert {name for name, _ in asked} == {"native-jax"}, asked
    asked.clear()
    checker.repeat = True
    try:
        checker.check(case, paths=["native-torch"])
    finally:
        checker.repeat = False
    # under ``repeat`` every worker is asked again, the path twice
    assert asked.count(("native-torch", "evaluate")) == 2, asked
    assert {f"{impl}.float64" for impl in IMPLEMENTATIONS} <= {n for n, _ in asked}
    asked.clear()
    checker.check(Case("ffn", 4, 2, steps=1))  # other batches: asked anew
    assert {name for name, _ in asked} >= set(checker.workers)
    # and only the last batches' answers are kept
    assert len({key[1] for key in checker._answers}) == 1
