from __future__ import annotations

import pytest
from pydantic import ValidationError

from harness.core.profiles import PROFILES, Profile, Settings, get_profile


def test_per_model_settings_replace_the_base() -> None:
    default = PROFILES["default"]
    assert default.settings("vgg16").train_steps == 2
    assert default.settings("ffn").train_steps == 50
    assert default.settings("lstm").train_steps == 2
    assert default.settings("lenet").batch_size is None  # the workload's own
    assert default.settings("vgg16").batch_size == 16
    assert PROFILES["smoke"].settings("vgg16").batch_size == 8


def test_unknown_profile_is_one_sentence() -> None:
    with pytest.raises(ValueError, match="unknown profile 'huge'; known profiles"):
        get_profile("huge")


def test_settings_are_hashable_immutable_values() -> None:
    ffn = PROFILES["default"].settings("ffn")
    again = Settings(
        train_steps=50,
        repeats=4,
        infer_batches=20,
        window_s=0.3,
        warmup_rounds=1,
        warmup_runs=1,
        infer_batch_sizes=(1, 16, 128),
        latency=True,
        pair_window_s=1.0,
        ratio_target=0.05,
        cell_budget_s=30.0,
        max_repeats=5,
    )
    assert ffn == again
    assert {ffn: "ffn"}[again] == "ffn"
    with pytest.raises(ValidationError, match="frozen"):
        ffn.repeats = 5  # type: ignore[misc]
    assert PROFILES["default"].base.repeats == 3  # replacements leave the base


def test_warmup_runs_and_repeats_are_separate_settings() -> None:
    ffn, vgg16 = (PROFILES["default"].settings(m) for m in ("ffn", "vgg16"))
    assert (ffn.warmup_runs, ffn.repeats) == (1, 4)
    assert (vgg16.warmup_runs, vgg16.repeats) == (0, 2)


def test_profiles_built_in_python_are_checked_too() -> None:
    base = PROFILES["smoke"].base
    with pytest.raises(ValidationError):
        Profile(name="x", settings=base, per_model={"ffn": {"repeats": 0}})
    with pytest.raises(ValidationError):
        Profile(name="x", settings=base, models=("ffn", "ffn"))
