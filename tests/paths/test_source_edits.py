"""The three faults that showed the judge's soft spots (issue 65), written
into native TensorFlow's code (``tests.source_edits``): every worker of
TensorFlow runs the edit, its path and its float64 and float32 reference
runs alike, as an edit to the file would put it there.  Each is blamed on
native TensorFlow alone, at its layer, in the words that say what it is;
no correct path is failed with it, although the vote leaves some paths'
allowances one float32 baseline (``equivalence.reference``, witnesses)."""

from __future__ import annotations

from pathlib import Path

import pytest

from equivalence.check import Case, Checker
from tests.source_edits import install

pytestmark = pytest.mark.paths

# The three reference implementations and one path of another framework's
# kernels that sums a bias gradient as native PyTorch does: a witness.
PATHS = ["native-torch", "native-jax", "native-tensorflow", "keras-tensorflow"]
EDITED = "native-tensorflow"


@pytest.mark.parametrize(
    "name", ["global-pool-divisor", "unbiased-moving-variance", "dropout-unscaled"]
)
def test_a_fault_in_tensorflows_code_is_blamed_on_it_alone_at_its_layer(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    edit = install(name, tmp_path / "edit", monkeypatch)
    assert edit.implementation == EDITED
    with Checker(PATHS) as checker:
        report = checker.check(Case(edit.model, 0, 4, steps=1))
    assert report.vote is not None
    assert report.vote.odd == EDITED
    others = {p: v for p, v in report.verdicts.items() if p != EDITED}
    assert others == dict.fromkeys(others, "pass"), report.multiples
    localization = report.localizations[EDITED]
    if edit.target is None:
        # The dropout check stops the evaluation: the error is the finding,
        # in its own words, never read as a numerical difference.
        assert report.verdicts[EDITED] == "error"
        assert report.vote.sentence is not None
        assert f"{EDITED} cannot vote: its reference runs failed" in (
            report.vote.sentence
        )
        assert localization.first is None
        assert localization.contradiction is None
        assert localization.raised is not None
        assert localization.raised.startswith(
            "its evaluation raised (error): ValueError: dropout layer 'drop' at "
            "rate 0.25 kept values off the input over 1 - rate"
        )
    else:
        assert report.verdicts[EDITED] == "fail"
        assert report.vote.fault == f"{EDITED}'s model code is wrong"
        assert localization.first == edit.target
        assert report.odd_localization is not None
        assert report.odd_localization.first == edit.target
    # With TensorFlow out of the vote, native PyTorch's allowance would rest
    # on JAX's float32 run alone; Keras on TensorFlow witnessed for it.
    assert report.witnesses["native-torch"] == ("keras-tensorflow",)
    assert report.allowance_note("native-torch") == (
        "native-jax's float32 baseline and 1 witness"
    )
