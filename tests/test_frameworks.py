"""The framework registry (``workers.frameworks``): every list of frameworks
comes from it, and a framework registered there but missing anywhere else is
refused with one sentence naming every place still missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core import gate
from workers import completeness, frameworks, paths
from workers.frameworks import FRAMEWORKS, FrameworkInfo


def test_every_shipped_framework_is_complete() -> None:
    assert {name: completeness.missing_pieces(name) for name in FRAMEWORKS} == {
        name: [] for name in FRAMEWORKS
    }
    assert completeness.incomplete() is None


def test_the_derived_lists_follow_the_registry() -> None:
    assert set(paths.OPTIONAL_FRAMEWORKS) == {"mxnet"}
    assert frameworks.keras_backends() == ("jax", "tensorflow", "torch")
    assert {p.framework for p in paths.PATHS.values()} == set(FRAMEWORKS)
    # the same eight distributions the verdict key always had
    assert set(frameworks.distributions()) == {
        "numpy", "keras", "jax", "jaxlib", "tensorflow-cpu", "tensorflow",
        "torch", "mxnet",
    }  # fmt: skip


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> FrameworkInfo:
    """A framework registered in the registry and nowhere else."""
    info = FrameworkInfo("toy", ("toyframe",), keras_backend=True)
    monkeypatch.setitem(FRAMEWORKS, "toy", info)
    return info


def test_a_toy_framework_registered_in_one_place_is_told_every_place_missing(
    toy: FrameworkInfo,
) -> None:
    missing = completeness.missing_pieces("toy")
    assert [m.split(":")[0] for m in missing] == [
        "native/__init__.py",
        "native/toy/",
        "workers/paths.py",  # no native-toy
        "workers/paths.py",  # no keras-toy
        "workers/paths.py",  # KERAS_MODES
        "workers/numerics.py",
        "workers/profiling.py",
        "pyproject.toml",
    ]
    sentence = completeness.incomplete()
    assert sentence is not None
    assert sentence.count("toy (") == 1
    for place in missing:
        assert place in sentence
    assert "jax (" not in sentence  # only the incomplete one is named


def test_the_gate_refuses_an_incomplete_registry(
    toy: FrameworkInfo, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=r"toy \(native/__init__.py"):
        gate.verify(["ffn"], ["native-torch"], tmp_path)
    with pytest.raises(ValueError, match="not complete"):
        gate.verdict_keys(["ffn"], ["native-torch"], tmp_path)
    assert not (tmp_path / gate.CACHE_NAME).exists()


def test_a_registered_framework_enters_the_verdict_key(toy: FrameworkInfo) -> None:
    # its distribution is read with the others, so upgrading it checks again
    assert "toyframe" in frameworks.distributions()


def test_a_framework_with_its_own_environment_must_be_built_by_nox(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "pyproject.toml").write_text('frameworks = ["torch==2.13.0"]\n')
    (tmp_path / "noxfile.py").write_text('PINS = ("mxnet==1.9.1",)\n')
    monkeypatch.setitem(
        FRAMEWORKS, "toy", FrameworkInfo("toy", ("toyframe",), environment=Path("x"))
    )
    found = completeness._missing_install(FRAMEWORKS["toy"], tmp_path)
    assert found == ["noxfile.py: toyframe and x"]
    assert completeness._missing_install(FRAMEWORKS["mxnet"], tmp_path) == [
        "noxfile.py: mxnet and .nox/mxnet-env"
    ]
    (tmp_path / "noxfile.py").write_text(
        'PINS = ("mxnet==1.9.1",)\nENV = "mxnet-env"\n'
    )
    assert completeness._missing_install(FRAMEWORKS["mxnet"], tmp_path) == []
    assert completeness._missing_install(FRAMEWORKS["torch"], tmp_path) == []
