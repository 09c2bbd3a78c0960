from __future__ import annotations

import pytest

from harness.profiles import PROFILES, get_profile


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
