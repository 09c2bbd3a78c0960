"""Faults written into a framework's native code (``tests.source_edits``):
every worker of that framework runs the edit, its path and its float64 and
float32 reference runs alike, as an edit to the file would put it there.
Each is blamed on the edited implementation alone, at its layer or in its
error's words, and no correct path is failed with it, although the vote
leaves some paths' allowances one float32 baseline
(``equivalence.reference``, witnesses).

The fast tier runs the global pool's wrong divisor, the fault that showed
a correct path failed once a vote removed a baseline (issue 65), on the three
reference implementations and one witness; the full tier runs every edit on
every path, issue 65's other two among them (the localizer's handling of
each is in ``tests/test_localize.py``, fast)."""

from __future__ import annotations

from pathlib import Path

import pytest

from equivalence.check import Case, Checker
from equivalence.keras_known import KNOWN_BUG
from tests.source_edits import EDITS, install
from tests.tiers import Sizes, full_only
from workers.paths import PATHS

pytestmark = pytest.mark.paths

FAST = "global-pool-divisor"
# The three reference implementations and Keras on JAX: no path of
# TensorFlow's kernels that passes (issue 74: native PyTorch failed there at
# m 17.6 before the perturbed run; the full tier has its witness).
FAST_PATHS = ["native-torch", "native-jax", "native-tensorflow", "keras-jax"]


@pytest.mark.sized
@pytest.mark.parametrize("name", list(EDITS))
def test_a_fault_in_a_frameworks_code_is_blamed_on_it_alone_at_its_layer(
    name: str, size: Sizes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if name != FAST:
        full_only(size, "a fault in a framework's code on every path (~45 s)")
    edit = install(name, tmp_path / "edit", monkeypatch)
    edited = edit.implementation
    paths = list(PATHS) if size.full_only else FAST_PATHS
    with Checker(paths) as checker:
        report = checker.check(Case(edit.model, 0, 4, steps=1))
    assert report.vote is not None
    assert report.vote.odd == edited
    mine = [p for p in report.verdicts if p.split("@", maxsplit=1)[0] == edited]
    # every other path passes, or fails as a known Keras bug makes it fail
    # (Keras on TensorFlow's Adam on an embedding: transformer-tiny)
    wrong = {
        p: report.multiples.get(p)
        for p, verdict in report.verdicts.items()
        if p not in mine
        and verdict not in ("pass", "unavailable")
        and not any(note.startswith(KNOWN_BUG) for note in report.notes(p))
    }
    assert wrong == {}
    for path in mine:
        localization = report.localizations[path]
        if edit.target is None:
            # The dropout check stops the evaluation: the error is the
            # finding, in its own words, never read as a numerical difference.
            assert report.verdicts[path] == "error"
            assert report.vote.sentence is not None
            assert f"{edited} cannot vote: its reference runs failed" in (
                report.vote.sentence
            )
            assert localization.first is None
            assert localization.contradiction is None
            assert localization.raised is not None
            assert localization.raised.startswith(
                "its evaluation raised (error): ValueError: dropout layer 'drop' "
                "at rate 0.25 kept values off the input over 1 - rate"
            )
        else:
            assert report.verdicts[path] == "fail"
            assert report.vote.fault == f"{edited}'s model code is wrong"
            assert localization.first == edit.target, path
            assert report.odd_localization is not None
            assert report.odd_localization.first == edit.target
    if name == "global-pool-divisor":
        # With TensorFlow out of the vote, native PyTorch's allowance would
        # rest on JAX's float32 run alone, which sums the conv-bias gradient
        # the accurate way: native PyTorch failed at m 30.  A path of
        # TensorFlow's kernels that passed witnesses for it where there is
        # one; the perturbed run allows it where there is none.
        assert report.verdicts["native-torch"] == "pass"
        if "keras-tensorflow" in paths:
            assert "keras-tensorflow" in report.witnesses["native-torch"]
        else:
            assert report.consulted_perturbed
