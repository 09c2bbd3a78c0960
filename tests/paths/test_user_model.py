"""A user's ``.keras`` file through a real Keras worker (``--model FILE``):
what comes out of a saved model is what was saved, a file Keras cannot read
or the spec cannot express is one sentence, and every path of an example
model passes the float64 judge."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.tiers import OPTION_MODELS, Sizes
from workers.launch import PROJECT_ROOT
from workers.paths import OPTIONAL_FRAMEWORKS, PATHS
from workers.user_model import model_from_file
from zoo import user_models
from zoo.specs import get_spec
from zoo.weights import make_weights

EXAMPLES = PROJECT_ROOT / "examples"
SEED = 3
# Saves each named spec built by zoo.keras_models with the canonical weights
# of SEED, as a user's model.save would, and a Sequential with a Lambda.
SAVE = f"""
import sys
import keras
from zoo.keras_models import build, set_weights
from zoo.specs import get_spec
from zoo.weights import make_weights
for name in sys.argv[2:]:
    spec = get_spec(name)
    model = build(spec)
    set_weights(model, spec, make_weights(spec, {SEED}))
    model.save(f"{{sys.argv[1]}}/{{name}}.keras")
lam = keras.Sequential([keras.Input((4,)), keras.layers.Lambda(lambda x: x * 2),
                        keras.layers.Dense(2)])
lam.save(f"{{sys.argv[1]}}/lambda.keras")
"""


def _python(tmp_path: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "KERAS_BACKEND": "torch"}
    return subprocess.run(
        [sys.executable, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(autouse=True)
def own_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``model_from_file`` makes its folder this process' store: put back
    whatever was there after each test."""
    monkeypatch.setenv(user_models.STORE_ENV, str(tmp_path / "models"))


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("saved")
    done = _python(folder, "-c", SAVE, str(folder), *OPTION_MODELS, timeout=300)
    assert done.returncode == 0, done.stderr
    return folder


@pytest.mark.parametrize("name", OPTION_MODELS)
def test_a_saved_model_comes_back_as_its_spec_and_weights(
    saved: Path, tmp_path: Path, name: str
) -> None:
    stored = model_from_file(saved / f"{name}.keras", tmp_path / "models")
    spec, original = get_spec(stored), get_spec(name)
    assert stored.startswith(name.replace("-", "_") + "-")
    assert spec.layers == original.layers
    assert spec.input_shape == original.input_shape
    weights, expected = make_weights(spec, 0), make_weights(original, SEED)
    assert weights.keys() == expected.keys()
    assert all(np.array_equal(weights[k], expected[k]) for k in expected)
    # read once: the same file again starts no worker and names the same model
    assert (tmp_path / "models" / "files").is_dir()
    assert model_from_file(saved / f"{name}.keras", tmp_path / "models") == stored


def test_a_lambda_layer_is_refused_before_keras_loads_it(
    saved: Path, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=r"\(Lambda\) is not one the tool knows") as e:
        model_from_file(saved / "lambda.keras", tmp_path / "models")
    assert "\n" not in str(e.value)
    assert not list((tmp_path / "models").glob("lambda-*"))


def test_a_damaged_weights_file_is_one_sentence(saved: Path, tmp_path: Path) -> None:
    import zipfile

    damaged = tmp_path / "damaged.keras"
    with (
        zipfile.ZipFile(saved / f"{OPTION_MODELS[0]}.keras") as source,
        zipfile.ZipFile(damaged, "w") as target,
    ):
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename == "model.weights.h5":
                data = data[: len(data) // 3]  # a download cut short
            target.writestr(info, data)
    with pytest.raises(ValueError, match="Keras cannot load") as e:
        model_from_file(damaged, tmp_path / "models")
    assert "\n" not in str(e.value)


@pytest.mark.sized
def test_every_path_of_an_example_passes_the_float64_judge(
    tmp_path: Path, size: Sizes
) -> None:
    # keras-team/keras#20902's model in the fast tier (its stacked LSTMs and
    # sequences reach every path only here; the fault suite runs every path
    # on strided-cnn's options); all three in the full tier
    examples = (
        ["stacked_lstm", "strided_cnn", "sigmoid_mlp"]
        if size.full_only
        else ["stacked_lstm"]
    )
    for example in examples:
        done = _python(
            tmp_path,
            "-m",
            "equivalence",
            "--model",
            str(EXAMPLES / f"{example}.keras"),
            "--steps",
            "2",
            "--batch-size",
            "4",
            "--seq-len",
            "6",
            timeout=900,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        stored = next((tmp_path / "results" / "models").glob(f"{example}-*"))
        assert f"== model='{stored.name}'" in done.stdout
        rows = [line.split() for line in done.stdout.splitlines()]
        # the verdict table's rows (the pairwise table's end in a parameter)
        verdicts = {
            r[0]: r[-1] for r in rows if r and r[0] in PATHS and "/" not in r[-1]
        }
        assert set(verdicts) == set(PATHS)
        for path, verdict in verdicts.items():
            optional = PATHS[path].framework in OPTIONAL_FRAMEWORKS
            assert verdict == "pass" or (optional and verdict == "unavailable"), path
