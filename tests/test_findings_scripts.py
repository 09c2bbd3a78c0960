"""A finding's claim is a test: each plain-framework script in docs/findings
that a page quotes runs here and must still show what the page says."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from workers.launch import PROJECT_ROOT

FINDINGS = PROJECT_ROOT / "docs" / "findings"


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="PyTorch is not installed"
)
def test_nll_loss_of_a_channels_last_image_cannot_train() -> None:
    """docs/results/per_position.md: keras.io's U-Net is refused because
    PyTorch's nll_loss raises in the backward pass of a channels-last image
    of log-probabilities (what Keras' sparse cross-entropy from
    probabilities hands it), and trains on the same values made contiguous;
    when a PyTorch release fixes it, this fails and the page is stale."""
    done = subprocess.run(
        [sys.executable, str(FINDINGS / "nll_loss_channels_last.py")],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["channels_last_input"]
    assert said["raised"] == "grad_input must be contiguous"
    assert said["contiguous_trains"]
