"""The gate checks what the harness times: every path's ``Trainer`` and
``Predictor`` (Keras' ``fit`` and ``predict``) against its own checked
trajectory and logits, on ffn, through the session's workers.

A timed fault (``native.faults.TIMED_FAULTS``) lives in one timed closure
only, so the equivalence checks pass the path (the gate asks for the timed
outputs of passing paths alone) and only this comparison can fail it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from equivalence.check import Checker
from harness.core.gate import verify
from harness.core.records import verified
from tests.paths.conftest import require

pytestmark = pytest.mark.paths


def _gate(
    checker: Checker,
    results: Path,
    faults: dict[str, str] | None = None,
    model: str = "ffn",
) -> tuple[dict[str, str], list[str]]:
    lines: list[str] = []
    verdicts = verify(
        [model],
        list(checker.workers),
        results,
        log=lines.append,
        faults=faults,
        checker=checker,
    )
    return verdicts[model], lines


def test_every_paths_timed_closures_compute_what_was_checked(
    checker: Checker, tmp_path: Path
) -> None:
    verdicts, lines = _gate(checker, tmp_path)
    assert verdicts == dict.fromkeys(checker.workers, "pass"), lines


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        (
            "timed-infer-bfloat16",
            "the timed predictor's logits of mini-batch 0 differ from the path's "
            "checked logits by ",
        ),
        (
            "timed-train-lr",
            "the timed trainer's parameter logits/bias after 2 steps differs from "
            "the path's checked trajectory by ",
        ),
    ],
    ids=["bfloat16-predictor", "learning-rate-trainer"],
)
def test_a_fault_in_a_timed_closure_alone_fails_its_path_at_the_gate(
    checker: Checker, tmp_path: Path, fault: str, reason: str
) -> None:
    require(checker, "native-torch")
    faults = {"native-torch": fault}
    verdicts, lines = _gate(checker, tmp_path, faults)
    assert verdicts["native-torch"] == "fail", lines
    assert {v for p, v in verdicts.items() if p != "native-torch"} == {"pass"}
    said = [line for line in lines if "native-torch fail: " in line]
    assert len(said) == 1, lines
    assert said[0].startswith(f"equivalence ffn: native-torch fail: {reason}")
    # The reason is cached with the verdict and said again when reused.
    again, lines = _gate(checker, tmp_path, faults)
    assert again == verdicts
    assert lines[0] == "equivalence ffn: cached verdicts still valid"
    assert lines[1].startswith(f"equivalence ffn: native-torch: {reason}")


def test_a_path_whose_training_alone_is_wrong_is_timed_for_inference_only(
    checker: Checker, tmp_path: Path
) -> None:
    # Adam's epsilon inside the square root: the forward pass and the
    # gradients are right, the update is not (as Keras on TensorFlow's Adam
    # on an embedding: docs/results/transformer.md).
    require(checker, "native-torch")
    faults = {"native-torch": "adam-eps-inside-sqrt"}
    verdicts, lines = _gate(checker, tmp_path, faults, model="lenet")
    assert verdicts["native-torch"] == "infer-only", lines
    said = [line for line in lines if "native-torch infer-only: " in line]
    assert len(said) == 1, lines
    assert "first parts from float64 at update" in said[0]
    assert said[0].endswith("so it is timed for inference only")
    assert verified(verdicts["native-torch"], "infer")
    assert not verified(verdicts["native-torch"], "train")
