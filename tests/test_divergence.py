"""A run that diverged to NaN or inf says so, and a worker refuses data the
gate did not check: real workers, PyTorch's two paths in the fast tier
(each check is the same few lines of ``workers.protocol`` in every runner,
and every path's worker is exercised by the gate's tests), every path of this
environment in the full tier.

Each path runs in a worker process of its own (``workers.launch.Worker``),
as in a benchmark, because Keras picks its backend once per process.  The
weights are ffn's canonical ones, healthy or broken on purpose: one kernel
entry set to inf (the forward pass is NaN at once), or the first kernel
multiplied by 1e20 (the forward pass is finite, training overflows within
three steps).  The framework-free pieces (the sentences, the wrappers the
runners return) are checked in-process first.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests import tiers
from workers import messages as m
from workers.launch import Reply, Worker
from workers.paths import PATHS, interpreter
from workers.protocol import Predictor, Trainer, check_outputs, check_training
from zoo.arrays import digest, save_npz
from zoo.data import make_batches
from zoo.models import get_spec
from zoo.weights import make_weights

# --- the sentences and wrappers, in-process ------------------------------------

PARAMS = {
    "fc1/kernel": np.ones((2, 2), np.float32),
    "fc1/bias": np.ones(2, np.float32),
    "fc2/kernel": np.ones((2, 2), np.float32),
    "fc2/bias": np.ones(2, np.float32),
    "logits/kernel": np.ones((2, 2), np.float32),
    "logits/bias": np.ones(2, np.float32),
}


def _with(**values: float) -> dict[str, np.ndarray]:
    params = {k: a.copy() for k, a in PARAMS.items()}
    for name, value in values.items():
        params[name.replace("__", "/")].flat[0] = value
    return params


def test_a_finite_run_passes() -> None:
    check = check_training(0.5, PARAMS)
    assert check.final_loss == 0.5
    assert check.nonfinite is None


def test_a_diverged_run_names_the_loss_and_a_few_parameters() -> None:
    nan = math.nan
    params = _with(fc1__kernel=nan, fc1__bias=nan, fc2__kernel=math.inf, fc2__bias=nan)
    check = check_training(nan, params)
    assert check.final_loss is None
    assert check.nonfinite == (
        "loss nan after the last timed run; 4 of 6 parameters hold NaN or inf: "
        "fc1/kernel, fc1/bias, fc2/kernel, ..."
    )


def test_a_loss_alone_or_a_parameter_alone_is_caught() -> None:
    loss_only = check_training(math.inf, PARAMS)
    assert loss_only.final_loss is None
    assert loss_only.nonfinite == (
        "loss inf after the last timed run; all 6 parameters are finite"
    )
    param_only = check_training(0.25, _with(logits__bias=-math.inf))
    assert param_only.final_loss == 0.25
    assert param_only.nonfinite == (
        "1 of 6 parameters holds NaN or inf after the last timed run: logits/bias"
    )


def test_outputs_count_their_nonfinite_values() -> None:
    assert check_outputs([np.zeros((2, 3)), np.ones(4)]) is None
    outputs = [np.array([[np.nan, 1.0, np.inf]]), np.array([-np.inf, 0.0])]
    assert check_outputs(outputs) == (
        "3 of 5 output values of the last timed round are NaN or inf"
    )


def test_the_wrappers_stay_plain_closures_and_check_afterwards() -> None:
    calls: list[int] = []
    trainer = Trainer(calls.append, lambda n: check_training(float(n), PARAMS))
    trainer(1)
    trainer(3)
    assert calls == [1, 3]
    assert trainer.finish().final_loss == 3.0  # the step count of the last run

    rounds = iter([[np.zeros(2)], [np.full(2, np.nan)]])
    predictor = Predictor(lambda: next(rounds), list)
    with pytest.raises(RuntimeError, match="no round has run"):
        predictor.nonfinite()
    predictor()
    assert predictor.nonfinite() is None
    predictor()
    assert predictor.nonfinite() == (
        "2 of 2 output values of the last timed round are NaN or inf"
    )


# --- real workers -----------------------------------------------------------------

# What the test environment must import for a path's worker to start here.
NEEDS = {
    "keras-jax": ("keras", "jax"),
    "keras-tensorflow": ("keras", "tensorflow"),
    "keras-torch": ("keras", "torch"),
    "native-jax": ("jax",),
    "native-tensorflow": ("tensorflow",),
    "native-torch": ("torch",),
}
MXNET = ("native-mxnet", "native-mxnet-hybrid")
assert set(NEEDS) | set(MXNET) == set(PATHS)
# The paths each tier runs these checks on (tests/tiers.py).
CHECKED = [*NEEDS, *MXNET] if tiers.size().full_only else [*tiers.COMMAND_PATHS]


def _skip_unless_runnable(path_id: str) -> None:
    if path_id in MXNET:
        python = os.environ.get("HARNESS_PYTHON_MXNET")
        if not python or not Path(python).exists():
            pytest.skip("HARNESS_PYTHON_MXNET names no MXNet interpreter")
        probe = subprocess.run(
            [interpreter("mxnet"), "-c", "import mxnet"],
            capture_output=True,
            check=False,
        )
        if probe.returncode:
            pytest.skip(f"{python} cannot import mxnet")
        return
    for module in NEEDS[path_id]:
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The batches and three weights files: healthy, one inf, one huge kernel."""
    root = tmp_path_factory.mktemp("divergence")
    spec = get_spec("ffn")
    healthy = make_weights(spec, 0)
    inf = {k: a.copy() for k, a in healthy.items()}
    inf["fc1/kernel"][0, 0] = np.inf
    huge = {k: a.copy() for k, a in healthy.items()}
    huge["fc1/kernel"] *= np.float32(1e20)
    x, y = make_batches(spec, 1, 8, 3)
    arrays = {"healthy": healthy, "inf": inf, "huge": huge, "data": {"x": x, "y": y}}
    for name, content in arrays.items():
        save_npz(root / f"{name}.npz", content)
    return {name: str(root / f"{name}.npz") for name in arrays}


@pytest.fixture(scope="module", params=CHECKED)
def worker(request: pytest.FixtureRequest) -> Iterator[Worker]:
    _skip_unless_runnable(request.param)
    with Worker(request.param, start_timeout=120) as started:
        assert started.failure is None, started.failure
        yield started


def _train(
    worker: Worker,
    files: dict[str, str],
    weights: str,
    weights_digest: str | None = None,
    data_digest: str | None = None,
) -> Reply:
    request = m.Train(
        model="ffn",
        weights=files[weights],
        data=files["data"],
        steps=2,
        runs=1,
        weights_digest=weights_digest,
        data_digest=data_digest,
    )
    return worker.call(request, timeout=120)


def _infer(
    worker: Worker,
    files: dict[str, str],
    weights: str,
    weights_digest: str | None = None,
    data_digest: str | None = None,
) -> Reply:
    request = m.Infer(
        model="ffn",
        weights=files[weights],
        data=files["data"],
        window_s=0.01,
        warmup_rounds=0,
        weights_digest=weights_digest,
        data_digest=data_digest,
    )
    return worker.call(request, timeout=120)


def _answer(reply: Reply) -> m.Answer:
    assert reply.ok, (reply.status, reply.error, reply.stderr_tail)
    assert reply.answer is not None
    json.dumps(m.encode(reply.answer), allow_nan=False)  # no NaN on the wire
    return reply.answer


def test_a_healthy_run_is_finite(worker: Worker, files: dict[str, str]) -> None:
    train = _answer(_train(worker, files, "healthy"))
    assert isinstance(train, m.TrainAnswer)
    assert train.nonfinite is None
    assert train.final_loss is not None
    # ffn starts near ln(10) and takes three small SGD steps.
    assert 0.5 < train.final_loss < 5.0
    infer = _answer(_infer(worker, files, "healthy"))
    assert isinstance(infer, m.InferAnswer)
    assert infer.nonfinite is None


@pytest.mark.parametrize("weights", ["inf", "huge"])
def test_a_diverged_training_run_says_so(
    worker: Worker, files: dict[str, str], weights: str
) -> None:
    train = _answer(_train(worker, files, weights))
    assert isinstance(train, m.TrainAnswer)
    assert train.final_loss is None
    assert train.nonfinite is not None
    assert train.nonfinite.startswith("loss nan after the last timed run; ")
    assert "of 6 parameters hold NaN or inf: fc1/kernel" in train.nonfinite


def test_nonfinite_outputs_are_counted(worker: Worker, files: dict[str, str]) -> None:
    infer = _answer(_infer(worker, files, "inf"))
    assert isinstance(infer, m.InferAnswer)
    # The inf meets inputs of both signs in fc1: every row of logits is NaN or
    # inf where the inf reached it.
    assert infer.nonfinite is not None
    assert infer.nonfinite.endswith(
        " of 240 output values of the last timed round are NaN or inf"
    )
    # With the huge kernel the pass stays finite: nothing to report.
    huge = _answer(_infer(worker, files, "huge"))
    assert isinstance(huge, m.InferAnswer)
    assert huge.nonfinite is None


def test_unchecked_files_are_refused(worker: Worker, files: dict[str, str]) -> None:
    wrong = "0" * 64
    reply = _train(worker, files, "healthy", weights_digest=wrong)
    assert reply.status == "error"
    assert reply.error is not None
    assert f"weights file {files['healthy']} holds other arrays" in reply.error
    assert "expected 000000000000); delete it to have it rebuilt" in reply.error

    reply = _infer(worker, files, "healthy", data_digest=wrong)
    assert reply.status == "error"
    assert reply.error is not None
    assert f"data file {files['data']} holds other arrays" in reply.error

    # The right digests are served; the weights digest of the broken file is
    # the broken file's, so that one still trains (and diverges).
    with np.load(files["data"]) as data:
        data_digest = digest({k: data[k] for k in data.files})
    with np.load(files["inf"]) as inf:
        inf_digest = digest({k: inf[k] for k in inf.files})
    train = _answer(
        _train(worker, files, "inf", weights_digest=inf_digest, data_digest=data_digest)
    )
    assert isinstance(train, m.TrainAnswer)
    assert train.nonfinite is not None
