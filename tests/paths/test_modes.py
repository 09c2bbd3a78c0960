"""Execution modes through real workers: every mode path passes the gate like
any path (its own outputs judged against float64, its timed closures against
what its checks saw), and a mode that computes something else fails it with
the layer where it parts from float64 (``harness run`` timing modes:
``test_modes_run.py``, apart so that this module's checker is closed first:
two checkers and a run's workers at once do not fit in 24 GiB; it runs after
this module and finds the modes' verdicts in the session's ``verdicts``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from equivalence.check import Checker
from harness.core.gate import verify
from tests.tiers import Sizes, full_only
from workers.paths import MODE_PATHS, get_path

pytestmark = pytest.mark.paths

MODE_IDS = list(MODE_PATHS)


@pytest.fixture(scope="module")
def mode_checker(checker: Checker) -> Iterator[Checker]:
    with Checker(MODE_IDS, references_from=checker) as c:
        for path, worker in c.workers.items():
            assert worker.failure is None, f"{path}: {worker.failure}"
        yield c


def _gate(
    checker: Checker, results: Path, faults: dict[str, str] | None = None
) -> tuple[dict[str, str], list[str]]:
    lines: list[str] = []
    verdicts = verify(
        ["ffn"], MODE_IDS, results, log=lines.append, faults=faults, checker=checker
    )
    return verdicts["ffn"], lines


def test_every_mode_passes_the_gate_in_its_mode(
    mode_checker: Checker, verdicts: Path
) -> None:
    passed, lines = _gate(mode_checker, verdicts)
    assert passed == dict.fromkeys(MODE_IDS, "pass"), lines
    for path, worker in mode_checker.workers.items():
        assert worker.platform["mode"] == get_path(path).mode
    platform = mode_checker.workers["keras-tensorflow@xla"].platform
    # op determinism would make Keras refuse XLA: the gate checks XLA
    assert platform["keras_jit_compile"] is True
    assert platform["numerics"]["op_determinism"] is False
    torch_compiled = mode_checker.workers["keras-torch@compile"].platform
    assert torch_compiled["keras_jit_compile"] is True
    assert torch_compiled["numerics"]["torch_recompile_limit"] >= 64
    assert mode_checker.workers["native-torch@compile"].platform["mode"] == "compile"


def test_a_mode_that_computes_something_else_fails_with_its_layer(
    mode_checker: Checker, tmp_path: Path
) -> None:
    faults = {
        "native-torch@compile": "missing-bias",  # in the compiled forward pass
        "keras-torch@compile": "timed-infer-bfloat16",  # its timed predictor only
    }
    verdicts, lines = _gate(mode_checker, tmp_path, faults)
    assert verdicts["native-torch@compile"] == "fail", lines
    assert verdicts["keras-torch@compile"] == "fail", lines
    assert verdicts["native-jax@layerjit"] == "pass", lines
    said = "\n".join(lines)
    assert "native-torch@compile fail: first parts from float64 at forward" in said
    assert "keras-torch@compile fail: the timed predictor's logits" in said


@pytest.mark.sized
def test_one_compiling_worker_checks_one_model_after_another(
    mode_checker: Checker, gated: Path, size: Sizes
) -> None:
    full_only(size, "a second model compiled in one torch.compile worker (80 s)")
    # With PyTorch's automatic dynamic shapes, Keras' LeNet failed to compile
    # in a process that had compiled ffn ("cannot determine truth value of
    # Relational"); the worker pins static shapes (workers.numerics).  The
    # module's worker checks ffn and then LeNet: ffn's verdict is cached when
    # the first test of this module compiled ffn in it already, else it is
    # checked here first.
    lines: list[str] = []
    verdicts = verify(
        ["ffn", "lenet"],
        ["keras-torch@compile"],
        gated,
        log=lines.append,
        checker=mode_checker,
    )
    pinned = mode_checker.workers["keras-torch@compile"].platform["numerics"]
    assert pinned["torch_automatic_dynamic_shapes"] is False
    assert verdicts == {
        "ffn": {"keras-torch@compile": "pass"},
        "lenet": {"keras-torch@compile": "pass"},
    }, lines
