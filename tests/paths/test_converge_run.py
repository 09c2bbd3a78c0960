"""``harness converge`` end to end on tiny MNIST IDX files: the gate's
cached verdicts, two paths, the ensemble of two implementations and their
vote, the records and the report."""

from __future__ import annotations

from pathlib import Path

import pytest

from equivalence.check import Checker
from harness.converge import report
from harness.converge.run import run_converge
from harness.core.gate import verify
from harness.core.profiles import PROFILES
from tests.datafiles import write_imdb, write_mnist
from tests.paths.conftest import require
from tests.sessions import noxfile, run_step, said
from tests.tiers import Sizes, full_only

pytestmark = pytest.mark.paths


def test_converge_trains_gated_paths_on_idx_files_and_reports(
    gated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    written = write_mnist(tmp_path / "data", train=256, test=40)
    profile = PROFILES["converge"]
    settings = profile.converge.model_copy(
        update={
            "epochs": 2,
            "ensemble": 2,
            "ensemble_paths": ("native-torch", "native-jax"),
            "per_model": {
                "ffn": {"target": 0.1, "batch_size": 64, "learning_rate": 0.05}
            },
        }
    )
    profile = profile.model_copy(update={"converge": settings})
    out = run_converge(
        profile,
        gated,
        models=["ffn"],
        paths=["keras-jax", "native-torch"],
        data_dir=tmp_path / "data",
    )
    err = capsys.readouterr().err
    assert "equivalence ffn: cached verdicts still valid" in err
    assert "MNIST IDX files in" in err
    found = report.load(out)
    runs = found.models["ffn"]
    assert [r["path"] for r in runs.paths] == ["keras-jax", "native-torch"]
    # native-torch trains as a path, so its plain run is that one
    assert [(r["path"], r["nudge"]) for r in runs.ensemble] == [
        ("native-torch", 1),
        ("native-torch", 2),
        ("native-jax", 0),
        ("native-jax", 1),
        ("native-jax", 2),
    ]
    for r in runs.paths + runs.ensemble:
        assert r["status"] == "ok", r.get("error")
        assert r["verdict"] == "pass"
        assert len(r["accuracy"]) == 2
        assert all(0.0 <= a <= 1.0 for a in r["accuracy"])
        assert all(s > 0 for s in r["train_s"])
        assert r["batches_per_epoch"] == 4  # 256 samples in batches of 64
        assert r["learning_rate"] == 0.05
        assert r["test_samples"] == len(written["test_y"])
        assert r["machine"]["cpu_isa"]
    assert runs.implementations() == ["native-torch", "native-jax"]
    assert len(runs.curves("native-torch")) == 3  # as it is, and two nudges
    assert runs.vote.judges == ("native-torch", "native-jax")
    assert found.ok, report.text(found)
    text = report.text(found)
    assert "ensemble of 6 runs on native-torch and native-jax" in text
    assert "agrees" in text
    # nox -s converge's report, as the session runs it: text, plot, exit 0
    (shipped,) = noxfile().converge_steps("converge", results=str(gated))[1:]
    assert "--plots" in shipped.argv
    done = run_step(shipped, tmp_path)
    assert done.returncode == 0, said(done)
    assert "ensemble of 6 runs" in done.stdout
    assert (gated / "plots" / "converge.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.sized
def test_a_model_with_an_embedding_converges_on_imdb_token_ids(
    checker: Checker,
    gated: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    size: Sizes,
) -> None:
    """The transformer's family trains on the ids of IMDB's reader (tiny
    reviews here), gated like any model."""
    full_only(
        size,
        "a second converge run end to end, on IMDB token ids (61 s); the fast "
        "tier reads IMDB in tests/test_datasets.py and runs converge once above",
    )
    paths = ["keras-jax", "native-torch"]
    for path in paths:
        require(checker, path)
    found = verify(["transformer-tiny"], paths, gated, checker=checker)
    assert set(found["transformer-tiny"].values()) == {"pass"}, found
    write_imdb(tmp_path / "data", per_folder=8)
    profile = PROFILES["converge"]
    settings = profile.converge.model_copy(
        update={
            "epochs": 1,
            "ensemble": 0,
            "per_model": {
                "transformer-tiny": {"target": 0.1, "batch_size": 8},
            },
        }
    )
    profile = profile.model_copy(update={"converge": settings})
    out = run_converge(
        profile,
        gated,
        models=["transformer-tiny"],
        paths=paths,
        data_dir=tmp_path / "data",
    )
    assert "token ids" in capsys.readouterr().err
    runs = report.load(out).models["transformer-tiny"]
    assert [r["path"] for r in runs.paths] == paths
    for r in runs.paths:
        assert r["status"] == "ok", r.get("error")
        assert r["batches_per_epoch"] == 2  # 16 reviews in batches of 8
        assert all(0.0 <= a <= 1.0 for a in r["accuracy"])
