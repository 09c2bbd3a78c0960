"""``harness run`` times execution modes and reports them side by side."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.bench.run import run
from harness.core import records
from harness.core.profiles import PROFILES
from harness.report.tables import report
from tests.tiers import Sizes, full_only
from workers.paths import get_path

pytestmark = pytest.mark.paths


@pytest.mark.sized
def test_a_run_times_modes_unpaired_and_reports_them(gated: Path, size: Sizes) -> None:
    full_only(
        size,
        "a second harness run end to end, timing modes (24 s); the fast tier "
        "gates every mode's timed closures (test_modes.py) and reports modes "
        "from records (tests/test_mode_report.py)",
    )
    # two modes of one framework (JAX's workers start in half TensorFlow's
    # time); every mode is timed through its worker by the gate's closures
    # check (test_modes.py)
    paths = ["native-jax", "native-jax@layerjit"]
    out = run(
        PROFILES["smoke"].model_copy(
            update={"paired": False, "peak_frameworks": False}
        ),
        models=["ffn"],
        paths=paths,
        phases=["train", "infer"],
        results_dir=gated,
    )
    recs = records.read(out)
    assert {(r.path, r.phase) for r in recs} == {
        (p, ph) for p in paths for ph in ("train", "infer")
    }
    for r in recs:
        assert (r.status, r.verified) == ("ok", True), (r.path, r.error)
        assert r.platform["mode"] == get_path(r.path).mode
        first = "first_step_s" if r.phase == "train" else "first_round_s"
        assert r.summary[first] > 0
    text = report(out, "table", "cells")
    assert "execution modes" in text
    assert "layerjit" in text
    assert "native-jax@layerjit" in text
