"""Every execution mode of every native framework against its default mode.

For each framework and each mode but its default (``native.MODES``), on the
feed-forward net, LeNet and the LSTM (at a short sequence: ``torch.compile``
unrolls its loop, and 250 steps take minutes to compile), from the same
weights and batch: the logits, the loss and every gradient, the parameters
made by two train steps (SGD for the net, Adam for LeNet and the LSTM) and
the logits of inference after them agree with the default mode's to float32
rounding.  A mode compiles the same operations differently, so its numbers
may differ in the last bits, never by more.  The comparison is shown to fail
on a mode that computes in bfloat16.  Also: the surface of every mode, the
default mode being ``common`` itself, an unknown mode refused.

Each case computes once per module (compiling takes seconds); a framework that
is not installed is skipped with its reason.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import native
from equivalence.compare import relative_error
from native import MODES, default_mode, layout, load_apply, load_framework, modes_of
from native.protocol import Framework
from tests import tiers
from zoo.data import make_batches
from zoo.specs import MODELS
from zoo.weights import make_weights

# Importing torch.compile's inductor backend defines TorchScript classes that
# warn of their own deprecation; the suite turns warnings into errors.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"
)

BATCH = 4
# The LSTM's apply takes any sequence length.
INPUT_SHAPES = {"ffn": None, "lenet": None, "lstm": (5, 50)}
# Same operations, compiled differently: float32 rounding apart.
TOLERANCE = 1e-5
# For what two train steps change: Adam divides each step by sqrt(v), which
# amplifies the rounding of small gradient entries (1.3e-5 measured for
# torch.compile's LeNet).  Still stricter than 1e-5 on the parameters: the
# steps change them by about 1e-2 of their size, so this is 1e-6 of them.
CHANGE_TOLERANCE = 1e-4
# The tier's models (tests/tiers.py): the feed-forward net alone in the fast
# tier, where every mode still compiles and runs; all three in the full one.
CASES = [
    (package, mode, model)
    for package, modes in MODES.items()
    for mode in modes[1:]
    for model in tiers.size().mode_models
]


# Compared in process in the full tier only: torch.compile takes some 30 s
# for ffn alone, and the fast tier gates native-torch@compile through its
# worker against float64 (tests/paths/test_modes.py).
FULL_TIER_ONLY = {("torch", "compile")}


# What a mode computed, as NumPy arrays by quantity name.
Outcome = dict[str, np.ndarray]


def _framework(package: str, mode: str) -> Framework:
    pytest.importorskip(package)
    return load_framework(package, mode)


def _run(fw: Framework, package: str, model: str) -> Outcome:
    """Logits, loss and gradients from the weights; what two train steps
    change in the parameters (the change, not the parameters, so that the
    comparison is as strict for a small update as for a large one);
    inference's logits after them."""
    spec = MODELS[model]
    weights = make_weights(spec, 0)
    xs, ys = make_batches(spec, 0, BATCH, 1, input_shape=INPUT_SHAPES[model])
    x, y = fw.to_input(xs[0]), fw.to_labels(ys[0])
    apply = load_apply(package, spec)

    def init() -> Any:
        return fw.init(layout.to_native(spec, weights, fw.LAYOUT))

    logits, loss, grads = fw.loss_and_grads(apply, init(), x, y)
    values = {"logits": fw.to_numpy(logits), "loss": fw.to_numpy(loss)}
    values |= {f"grad:{name}": fw.to_numpy(g) for name, g in grads.items()}
    params = init()
    before = {name: fw.to_numpy(a) for name, a in fw.arrays(params).items()}
    state = fw.make_train_state(params, spec.workload)
    for _ in range(2):
        state = fw.train_step(apply, state, x, y)
    trained = fw.state_params(state)
    values |= {
        f"change:{name}": fw.to_numpy(a) - before[name]
        for name, a in fw.arrays(trained).items()
    }
    values["inference"] = fw.to_numpy(fw.inference(apply, trained, x))
    return values


@functools.cache
def _outcome(package: str, mode: str, model: str) -> Outcome:
    return _run(_framework(package, mode), package, model)


def _disagreements(ours: Outcome, reference: Outcome) -> dict[str, float]:
    """Each quantity whose relative error to the reference's exceeds its
    tolerance (a missing one counts as infinitely wrong), with its error."""
    errors = {
        name: relative_error(ours[name], expected) if name in ours else float("inf")
        for name, expected in reference.items()
    }
    return {name: e for name, e in errors.items() if not e <= _tolerance(name)}


def _tolerance(name: str) -> float:
    return CHANGE_TOLERANCE if name.startswith("change:") else TOLERANCE


@pytest.fixture(scope="module", params=CASES, ids=["-".join(case) for case in CASES])
def pair(request: pytest.FixtureRequest) -> tuple[Outcome, Outcome]:
    """(the mode's outcome, the default mode's) for one case."""
    package, mode, model = request.param
    if (package, mode) in FULL_TIER_ONLY:
        tiers.full_only(
            tiers.size(),
            f"{package}'s {mode} mode compared in process (its worker is gated "
            "against float64 in the fast tier)",
        )
    return _outcome(package, mode, model), _outcome(package, MODES[package][0], model)


def _of(errors: dict[str, float], *prefixes: str) -> dict[str, float]:
    return {name: e for name, e in errors.items() if name.startswith(prefixes)}


@pytest.mark.sized
def test_logits_loss_and_gradients_agree(pair: tuple[Outcome, Outcome]) -> None:
    assert _of(_disagreements(*pair), "logits", "loss", "grad:") == {}


@pytest.mark.sized
def test_two_train_steps_make_the_same_changes(
    pair: tuple[Outcome, Outcome],
) -> None:
    assert _of(_disagreements(*pair), "change:") == {}


@pytest.mark.sized
def test_inference_agrees(pair: tuple[Outcome, Outcome]) -> None:
    assert _of(_disagreements(*pair), "inference") == {}


def test_the_comparison_catches_a_bfloat16_mode() -> None:
    """The same check fails for a mode whose gradient pass runs in bfloat16
    (about 3 significant digits): the tolerance is tight enough to see it."""
    pytest.importorskip("jax")
    import jax.numpy as jnp

    fw = load_framework("jax")

    def loss_and_grads(apply: Any, params: Any, x: Any, y: Any) -> Any:
        low = {name: p.astype(jnp.bfloat16) for name, p in params.items()}
        logits, loss, grads = fw.loss_and_grads(apply, low, x.astype(jnp.bfloat16), y)
        grads = {name: g.astype(jnp.float32) for name, g in grads.items()}
        return logits.astype(jnp.float32), loss.astype(jnp.float32), grads

    bfloat16 = native.in_mode(fw, "bfloat16", loss_and_grads=loss_and_grads)
    errors = _disagreements(_run(bfloat16, "jax", "ffn"), _outcome("jax", "jit", "ffn"))
    assert "logits" in errors
    assert _of(errors, "grad:")
    assert not _of(errors, "change:")  # its train steps are the default's


# The surface ----------------------------------------------------------------


def _parameters(function: Callable[..., object]) -> list[str]:
    return [p for p in inspect.signature(function).parameters if p != "self"]


@pytest.mark.parametrize("package", list(MODES))
def test_modes_are_listed_alike_everywhere(package: str) -> None:
    pytest.importorskip(package)
    modes = importlib.import_module(f"native.{package}.modes")
    assert tuple(modes.MODES) == MODES[package] == modes_of(package)
    assert modes.DEFAULT == MODES[package][0] == default_mode(package)
    assert all(isinstance(line, str) and line for line in modes.MODES.values())


@pytest.mark.parametrize(
    ("package", "mode"),
    [(package, mode) for package, modes in MODES.items() for mode in modes[1:]],
)
def test_every_mode_meets_the_framework_protocol(package: str, mode: str) -> None:
    fw = _framework(package, mode)
    members = [m for m in vars(Framework) if not m.startswith("_")]
    for member in members:
        assert _parameters(getattr(fw, member)) == _parameters(
            getattr(Framework, member)
        ), member
    common = load_framework(package)
    assert fw.LAYOUT == common.LAYOUT
    assert fw.to_input is common.to_input
    base = load_framework("mxnet-hybrid") if mode == "hybrid" else common
    described = fw.describe()
    assert described.pop("mode") == mode
    assert described == base.describe()


@pytest.mark.parametrize("package", list(MODES))
def test_the_default_mode_is_common_itself(package: str) -> None:
    pytest.importorskip(package)
    common = importlib.import_module(f"native.{package}.common")
    modes = importlib.import_module(f"native.{package}.modes")
    assert modes.framework(modes.DEFAULT) is common
    assert load_framework(package, modes.DEFAULT) is common
    assert load_framework(package) is common


@pytest.mark.parametrize("package", list(MODES))
def test_an_unknown_mode_is_refused_naming_the_known_ones(package: str) -> None:
    with pytest.raises(ValueError, match="known: " + ", ".join(MODES[package])):
        load_framework(package, "turbo")  # refused before importing the framework
    pytest.importorskip(package)
    modes = importlib.import_module(f"native.{package}.modes")
    with pytest.raises(ValueError, match="known: " + ", ".join(MODES[package])):
        modes.framework("turbo")


def test_mxnet_hybrid_runs_only_its_own_mode() -> None:
    assert modes_of("mxnet-hybrid") == ("hybrid",)
    with pytest.raises(ValueError, match="no mode 'imperative'; known: hybrid"):
        load_framework("mxnet-hybrid", "imperative")
    pytest.importorskip("mxnet")
    hybrid = importlib.import_module("native.mxnet.hybrid")
    assert load_framework("mxnet-hybrid") is hybrid
    assert load_framework("mxnet-hybrid", "hybrid").describe()["mode"] == "hybrid"


def test_an_unknown_framework_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown native framework 'caffe'"):
        modes_of("caffe")
