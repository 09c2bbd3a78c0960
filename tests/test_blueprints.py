"""The shipped blueprints, user blueprints, and one message per kind of error."""

from __future__ import annotations

from dataclasses import replace
from importlib import resources
from pathlib import Path

import pytest

from harness.paths import PATHS, PHASES
from harness.profiles import (
    PROFILES,
    SHIPPED,
    Profile,
    Settings,
    get_profile,
    parse_blueprint,
)
from zoo.specs import MODELS

# The profiles as the shipped files must give them, value for value.
BEFORE = {
    "smoke": Profile(
        "smoke",
        Settings(
            train_steps=2, repeats=1, infer_batches=2, window_s=0.5, warmup_rounds=1
        ),
        per_model={"vgg16": {"batch_size": 8}, "lstm": {"batch_size": 32}},
        fresh_worker_per_cell=False,
    ),
    "default": Profile(
        "default",
        Settings(
            train_steps=3, repeats=3, infer_batches=4, window_s=0.3, warmup_rounds=1
        ),
        per_model={
            "ffn": {
                "train_steps": 50,
                "repeats": 4,
                "infer_batches": 20,
                "warmup_repeats": 1,
                "infer_batch_sizes": (1, 16, 128),
                "latency": True,
            },
            "lenet": {
                "train_steps": 20,
                "repeats": 4,
                "infer_batches": 10,
                "warmup_repeats": 1,
                "latency": True,
            },
            "vgg16": {"batch_size": 16, "train_steps": 2, "infer_batches": 1},
            "lstm": {"batch_size": 64, "train_steps": 2, "infer_batches": 2},
        },
        fresh_worker_per_cell=False,
    ),
    "paper": Profile(
        "paper",
        Settings(
            train_steps=100,
            repeats=7,
            infer_batches=8,
            window_s=60.0,
            warmup_rounds=3,
            # new with the blueprints: the paper's inference batch-size sweep
            infer_batch_sizes=(1, 16, 128),
        ),
    ),
}

MINIMAL = """
[settings]
train_steps = 3
repeats = 3
infer_batches = 4
window_s = 3.0
warmup_rounds = 1
"""


def test_every_shipped_file_is_listed() -> None:
    folder = resources.files("harness").joinpath("blueprints")
    names = {p.name for p in folder.iterdir() if p.name.endswith(".toml")}
    assert names == {f"{name}.toml" for name in SHIPPED}
    assert list(PROFILES) == list(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_blueprint_keeps_the_python_values(name: str) -> None:
    loaded = PROFILES[name]
    assert replace(loaded, description="") == BEFORE[name]
    assert loaded.description
    assert loaded.models == tuple(MODELS)
    assert loaded.paths == tuple(PATHS)
    assert loaded.phases == PHASES
    assert (loaded.seed, loaded.data) == (1, "synthetic")
    assert loaded.threads == {"intra_op": "auto", "inter_op": "auto"}
    for model in MODELS:
        assert loaded.settings(model) == BEFORE[name].settings(model)


def test_user_blueprint_loads_from_a_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    top = """
description = "VGG variants only"
models = ["vgg16", "vgg-rysia"]
paths = ["native-torch", "keras-torch"]
phases = ["infer"]
seed = 7
timeout_s = 60
[threads]
intra_op = 2
"""
    rest = """
latency = true
infer_batch_sizes = [1, 32]
[per_model."vgg-rysia"]
batch_size = 16
window_s = 2
"""
    path.write_text(top + MINIMAL + rest, encoding="utf-8")
    for ref in (path, str(path)):
        profile = get_profile(ref)
        assert profile.name == "mine"
        assert profile.models == ("vgg16", "vgg-rysia")
        assert profile.paths == ("native-torch", "keras-torch")
        assert profile.phases == ("infer",)
        assert (profile.seed, profile.timeout_s) == (7, 60.0)
        assert profile.threads == {"intra_op": 2, "inter_op": "auto"}
        rysia = profile.settings("vgg-rysia")
        assert (rysia.batch_size, rysia.window_s, rysia.latency) == (16, 2.0, True)
        assert isinstance(rysia.window_s, float)
        assert rysia.infer_batch_sizes == (1, 32)
        assert profile.settings("vgg16").batch_size is None


def test_all_selects_every_model_path_and_phase() -> None:
    text = 'models = "all"\npaths = "all"\nphases = "all"\n' + MINIMAL
    profile = parse_blueprint("x", text)
    assert profile.models == tuple(MODELS)
    assert profile.paths == tuple(PATHS)
    assert profile.phases == PHASES


def _error(text: str) -> str:
    with pytest.raises(ValueError, match=r".") as caught:
        parse_blueprint("default", text)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_unknown_key() -> None:
    assert _error(MINIMAL + "train_step = 2\n") == (
        "default.toml: settings.train_step is not a known key (did you mean "
        "train_steps?); known keys: train_steps, repeats, infer_batches, "
        "window_s, warmup_rounds, warmup_repeats, batch_size, infer_batch_sizes, "
        "latency"
    )


def test_setting_outside_its_table() -> None:
    message = _error("repeats = 3\n" + MINIMAL)
    assert message.startswith(
        "default.toml: repeats is not a known key (settings belong in the "
        "[settings] table); known keys: description, models,"
    )


def test_wrong_type() -> None:
    assert _error('timeout_s = "long"\n' + MINIMAL) == (
        'default.toml: timeout_s must be a number > 0, got "long"'
    )


def test_bool_is_not_an_integer() -> None:
    assert _error(MINIMAL + "[per_model.vgg16]\nrepeats = true\n") == (
        "default.toml: per_model.vgg16.repeats must be an integer >= 1, got true"
    )


def test_out_of_range() -> None:
    assert _error(MINIMAL + "[per_model.vgg16]\ntrain_steps = 0\n") == (
        "default.toml: per_model.vgg16.train_steps must be an integer >= 1, got 0"
    )
    assert _error(MINIMAL.replace("window_s = 3.0", "window_s = 0.0")) == (
        "default.toml: settings.window_s must be a number > 0, got 0.0"
    )
    assert _error(MINIMAL + "infer_batch_sizes = [1, 0]\n") == (
        "default.toml: settings.infer_batch_sizes must be a non-empty list of "
        "distinct integers >= 1, got 0"
    )


def test_missing_required_setting() -> None:
    assert _error(MINIMAL.replace("repeats = 3\n", "")) == (
        "default.toml: settings.repeats is missing; it must be an integer >= 1"
    )


def test_unknown_model() -> None:
    known = "ffn, lenet, vgg16, lstm, vgg-rysia"
    assert _error('models = ["ffn", "resnet"]\n' + MINIMAL) == (
        'default.toml: models must be "all" or a list of distinct names from '
        f'{known}, got "resnet"'
    )
    assert _error(MINIMAL + "[per_model.resnet]\nrepeats = 1\n") == (
        f"default.toml: per_model.resnet is not a known model; known models: {known}"
    )


def test_unknown_path_and_phase() -> None:
    assert _error('paths = ["native-torch", "native-cobol"]\n' + MINIMAL) == (
        'default.toml: paths must be "all" or a list of distinct names from '
        + ", ".join(PATHS)
        + ', got "native-cobol"'
    )
    assert _error('phases = ["train", "train"]\n' + MINIMAL) == (
        'default.toml: phases must be "all" or a list of distinct names from '
        'train, infer, got "train" twice'
    )


def test_unknown_data_and_threads() -> None:
    assert _error('data = "mnist"\n' + MINIMAL) == (
        'default.toml: data must be one of "synthetic", got "mnist"'
    )
    assert _error("[threads]\ninter_op = 0\n" + MINIMAL) == (
        'default.toml: threads.inter_op must be an integer >= 1 or "auto", got 0'
    )


def test_bad_toml() -> None:
    assert _error("models = [ffn]\n") == (
        "default.toml is not valid TOML: Invalid value (at line 1, column 11)"
    )


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "gone.toml"
    with pytest.raises(ValueError, match=r".") as caught:
        get_profile(str(path))
    assert str(caught.value) == (
        f"no blueprint file {str(path)!r}; give the path of an existing .toml "
        "file or a shipped profile (smoke, default, paper)"
    )


def test_user_file_errors_name_its_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(MINIMAL + "batch_size = -1\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r".") as caught:
        get_profile(path)
    assert str(caught.value) == (
        f"{path}: settings.batch_size must be an integer >= 1, got -1"
    )
