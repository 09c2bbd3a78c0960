from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.core.profiles import (
    PROFILES,
    Inference,
    Profile,
    Settings,
    Training,
    get_profile,
    load_blueprint,
    parse_blueprint,
)


def test_per_model_settings_replace_the_base() -> None:
    default = PROFILES["default"]
    assert default.settings("vgg16").train_steps == 2
    assert default.settings("ffn").train_steps == 50
    assert default.settings("lstm").train_steps == 2
    assert default.settings("lenet").batch_size is None  # the workload's own
    assert default.settings("vgg16").batch_size == 8
    assert PROFILES["smoke"].settings("vgg16").batch_size == 8


def test_unknown_profile_is_one_sentence() -> None:
    with pytest.raises(ValueError, match="unknown profile 'huge'; known profiles"):
        get_profile("huge")


def test_settings_are_hashable_immutable_values() -> None:
    ffn = PROFILES["default"].settings("ffn")
    again = Settings(
        train_steps=50,
        repeats=2,
        infer_batches=20,
        window_s=0.3,
        warmup_rounds=1,
        warmup_runs=1,
        infer_batch_sizes=(1, 128),
        latency=True,
        pair_window_s=1.0,
        ratio_target=0.01,
        cell_budget_s=90.0,
        max_repeats=8,
    )
    assert ffn == again
    assert {ffn: "ffn"}[again] == "ffn"
    with pytest.raises(ValidationError, match="frozen"):
        ffn.repeats = 5  # type: ignore[misc]
    assert PROFILES["default"].base.train_steps == 3  # replacements leave the base


def test_warmup_runs_and_repeats_are_separate_settings() -> None:
    ffn, vgg16 = (PROFILES["default"].settings(m) for m in ("ffn", "vgg16"))
    assert (ffn.warmup_runs, ffn.repeats) == (1, 2)
    assert (vgg16.warmup_runs, vgg16.repeats) == (0, 2)


def test_profiles_built_in_python_are_checked_too() -> None:
    base = PROFILES["smoke"].base
    with pytest.raises(ValidationError):
        Profile(name="x", settings=base, per_model={"ffn": {"repeats": 0}})
    with pytest.raises(ValidationError):
        Profile(name="x", settings=base, models=("ffn", "ffn"))


TRAIN_ONLY = """
phases = ["train"]
[settings]
train_steps = 3
repeats = 2
"""


def test_a_train_only_blueprint_needs_no_inference_settings(tmp_path: Path) -> None:
    profile = parse_blueprint("mine", TRAIN_ONLY)
    ffn = profile.settings("ffn")
    assert (ffn.train_steps, ffn.infer_batches, ffn.window_s) == (3, None, None)
    assert ffn.training() == Training(train_steps=3, warmup_runs=0)
    assert ffn.batches("train") == 3
    assert len(profile.digest()) == 64
    with pytest.raises(ValueError, match=r"^settings\.infer_batches is missing"):
        ffn.inference()
    # A run asking for the phase the blueprint leaves out: one sentence.
    with pytest.raises(ValueError, match="is missing") as caught:
        profile.require(["train", "infer"], ["ffn"])
    assert str(caught.value) == (
        "profile mine: settings.infer_batches is missing; it must be an integer "
        "from 1 to 10000 for the infer phase"
    )
    profile.require(["train"], ["ffn", "vgg16"])
    file = tmp_path / "mine.toml"
    file.write_text(TRAIN_ONLY)
    assert load_blueprint(file) == profile


def test_an_inference_blueprint_without_them_is_refused_in_one_sentence() -> None:
    infer_only = TRAIN_ONLY.replace('["train"]', '["infer"]') + "infer_batches = 4\n"
    with pytest.raises(ValueError, match="is missing") as caught:
        parse_blueprint("mine", infer_only)
    assert str(caught.value) == (
        "mine.toml: settings.window_s is missing; it must be a number > 0 and "
        "<= 3600 for the infer phase"
    )
    both = TRAIN_ONLY.replace('phases = ["train"]\n', "")  # the default: both
    with pytest.raises(ValueError, match="is missing") as caught:
        parse_blueprint("mine", both, "blue/mine.toml")
    assert str(caught.value) == (
        "blue/mine.toml: settings.infer_batches is missing; it must be an integer "
        "from 1 to 10000 for the infer phase"
    )


def test_per_model_settings_may_supply_a_phase_setting() -> None:
    text = TRAIN_ONLY.replace('["train"]', '["train", "infer"]') + (
        "infer_batches = 4\nwarmup_rounds = 1\n"
    )
    with pytest.raises(ValueError, match=r"settings\.window_s is missing"):
        parse_blueprint("mine", text)
    only_ffn = text.replace("[settings]", 'models = ["ffn"]\n[settings]') + (
        "[per_model.ffn]\nwindow_s = 0.5\n"
    )
    profile = parse_blueprint("mine", only_ffn)
    assert profile.settings("ffn").inference().window_s == 0.5
    with pytest.raises(ValueError, match=r"profile mine: settings\.window_s"):
        profile.require(["infer"], ["lenet"])  # --models lenet


def test_an_inference_only_blueprint_needs_no_train_steps() -> None:
    text = TRAIN_ONLY.replace('["train"]', '["infer"]').replace("train_steps = 3\n", "")
    profile = parse_blueprint(
        "mine", text + "infer_batches = 4\nwindow_s = 1.0\nwarmup_rounds = 0\n"
    )
    assert profile.settings("ffn").inference() == Inference(4, 1.0, 0)
    with pytest.raises(ValueError, match=r"settings\.train_steps is missing"):
        profile.require(["train"], ["ffn"])


def test_a_run_of_a_phase_the_blueprint_leaves_out_is_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.__main__ import main

    file = tmp_path / "mine.toml"
    file.write_text(TRAIN_ONLY)
    args = ["run", "--profile", str(file), "--phases", "infer", "--models", "ffn"]
    assert main([*args, "--results", str(tmp_path / "results")]) == 2
    assert capsys.readouterr().err == (
        "error: profile mine: settings.infer_batches is missing; it must be an "
        "integer from 1 to 10000 for the infer phase\n"
    )
    assert not (tmp_path / "results").exists()  # refused before anything ran


def test_setting_every_phase_keeps_the_digest_it_had_when_all_were_required() -> None:
    # Computed before the phases' settings became optional: a blueprint that
    # sets them all (every shipped one does) keeps its digest, so --resume
    # still takes runs measured before (at the threads that were the default
    # then, and with helper threads confined, as every worker was before the
    # key: a blueprint that leaves it out now frees them, another measure).
    text = """
helpers = "confined"
models = ["ffn", "lstm"]
phases = ["train", "infer"]
[threads]
intra_op = "auto"
inter_op = "auto"
[settings]
train_steps = 3
repeats = 2
infer_batches = 4
window_s = 0.5
warmup_rounds = 1
[per_model.lstm]
train_steps = 2
"""
    assert parse_blueprint("pinned", text).digest() == (
        "2bbfd479aaa8f239349b0014406e2d79140dc935dbe2ef8ab5b617e2a116904b"
    )


def test_converge_files_in_a_blueprint_are_read_from_its_folder(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "blueprints"
    folder.mkdir()
    (folder / "mine.toml").write_text(
        TRAIN_ONLY + '[converge]\ndata = "data"\nglove = "/abs/glove.txt"\n'
    )
    converge = load_blueprint(folder / "mine.toml").converge
    assert converge.data == str(folder / "data")  # not the working folder's
    assert converge.glove == "/abs/glove.txt"
    text = TRAIN_ONLY + '[converge]\ndata = "data"\n'
    assert parse_blueprint("x", text).converge.data == "data"


def test_an_ensemble_of_no_runs_is_refused_when_read() -> None:
    with pytest.raises(
        ValueError, match=r"converge.ensemble must be an integer from 1 to 64, got 0"
    ):
        parse_blueprint("x", TRAIN_ONLY + "[converge]\nensemble = 0\n")
