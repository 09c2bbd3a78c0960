"""Every framework's hand-written losses (``common.loss``) against one NumPy
float64 statement of Keras' formulas, which is itself held against Keras'
own loss objects; a loss given the other ``from_logits`` is caught.

The outputs include a row whose smallest probability is far below
``zoo.losses.EPSILON``, so Keras' clip is exercised, not only its formula
away from the clip.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from equivalence.compare import relative_error
from equivalence.reference import IMPLEMENTATIONS
from native import FRAMEWORKS, compose, load_framework
from zoo.losses import (
    EPSILON,
    LOSSES,
    PAIRED,
    Objective,
    check,
    check_outputs,
    draw_targets,
    from_keras,
    keras_loss,
    reaches_back,
)

OBJECTIVES = [
    Objective(name, logits)
    for name, facts in LOSSES.items()
    for logits in ((True, False) if facts.takes_logits else (False,))
] + [
    # Keras' options of the losses that take them, away from the defaults
    Objective("categorical_crossentropy", True, label_smoothing=0.3),
    Objective("categorical_crossentropy", False, label_smoothing=0.2),
    Objective("binary_crossentropy", True, label_smoothing=0.1),
    Objective("binary_crossentropy", False, label_smoothing=0.2),
    Objective("binary_focal_crossentropy", True, gamma=1.5, alpha=0.25),
    Objective("binary_focal_crossentropy", False, 0.1, gamma=3.0, alpha=0.6),
]


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-z))


# The clip's bounds as a float32 computation has them: 1 - 1e-7 rounds to
# 1 - 1.19e-7 there, which moves the log of a clipped 1 - p by 17%.
LOW, HIGH = float(np.float32(EPSILON)), float(np.float32(1 - EPSILON))


def _log_sigmoid(z: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -z)


def _activated(z: np.ndarray, goal: Objective) -> np.ndarray:
    """Outputs ``z`` as a model that gives ``goal`` its probabilities (or
    counts) ends them: in the loss's activation, unless from logits."""
    activation = None if goal.from_logits else LOSSES[goal.loss].activation
    if activation == "softmax":
        return np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
    if activation == "sigmoid":
        return _sigmoid(z)
    if activation == "softplus":
        return np.logaddexp(0.0, z)
    return z


def numpy_loss(outputs: np.ndarray, y: np.ndarray, goal: Objective) -> float:
    """Keras 3's formulas in float64 (see ``zoo.losses``), with the clip of
    a float32 computation."""
    o = outputs.astype(np.float64)
    y = _numpy_smoothed(y, goal, o.shape[1])
    if goal.loss == "binary_focal_crossentropy":
        return float(_numpy_focal(o, y, goal).mean(axis=1).mean())
    if goal.loss.endswith("categorical_crossentropy"):
        if goal.from_logits:
            log_p = np.log(_softmax(o))
        else:
            log_p = np.log(np.clip(o / o.sum(axis=1, keepdims=True), LOW, HIGH))
        if goal.loss.startswith("sparse"):
            return float(-log_p[np.arange(len(y)), y].mean())
        return float(-(y * log_p).sum(axis=1).mean())
    if goal.loss == "binary_crossentropy":
        if goal.from_logits:
            log_p, log_not_p = _log_sigmoid(o), _log_sigmoid(-o)
        else:
            p = np.clip(o, LOW, HIGH)
            log_p, log_not_p = np.log(p), np.log(1 - p)
        return float(-(y * log_p + (1 - y) * log_not_p).mean(axis=1).mean())
    if goal.loss in PAIRED:
        return float(_numpy_paired(o, y.astype(np.float64), goal.loss).mean())
    error = o - y
    if goal.loss == "huber":  # delta 1
        e = np.abs(error)
        per = np.where(e <= 1.0, 0.5 * e**2, e - 0.5)
    elif goal.loss == "log_cosh":
        per = np.log(np.cosh(error))
    else:
        per = error**2 if goal.loss == "mean_squared_error" else np.abs(error)
    return float(per.mean(axis=1).mean())


def _numpy_paired(o: np.ndarray, t: np.ndarray, loss: str) -> np.ndarray:
    """Each row's loss of the losses that take outputs and targets apart."""
    if loss == "hinge":
        return np.maximum(1 - t * o, 0).mean(axis=1)
    if loss == "poisson":
        return (o - t * np.log(o + EPSILON)).mean(axis=1)
    if loss == "kl_divergence":
        t, p = np.clip(t, EPSILON, 1), np.clip(o, EPSILON, 1)
        return np.asarray((t * np.log(t / p)).sum(axis=1))
    unit_t = t / np.linalg.norm(t, axis=1, keepdims=True)
    unit_o = o / np.linalg.norm(o, axis=1, keepdims=True)
    return np.asarray(-(unit_t * unit_o).sum(axis=1))


def _numpy_smoothed(y: np.ndarray, goal: Objective, width: int) -> np.ndarray:
    """Keras' label smoothing of one-hot rows of ``width`` and binary targets."""
    s = goal.label_smoothing
    if goal.loss == "categorical_crossentropy":
        return y * (1 - s) + s / width
    return y * (1 - s) + s / 2 if goal.loss.startswith("binary") else y


def _numpy_focal(o: np.ndarray, y: np.ndarray, goal: Objective) -> np.ndarray:
    """Keras' binary focal cross-entropy of each output, in float64."""
    p = _sigmoid(o) if goal.from_logits else o
    q = np.clip(p, LOW, HIGH)
    bce = -(y * np.log(q) + (1 - y) * np.log(1 - q))
    p_t = y * p + (1 - y) * (1 - p)
    per: np.ndarray = (1 - p_t) ** goal.gamma * bce
    if goal.alpha is None:
        return per
    return per * (y * goal.alpha + (1 - y) * (1 - goal.alpha))


def _case(goal: Objective) -> tuple[np.ndarray, np.ndarray]:
    """Outputs of 6 examples (as a model ending in the loss's activation
    gives them when it takes probabilities) and their targets."""
    rng = np.random.default_rng(7)
    width = 4 if goal.loss.endswith("categorical_crossentropy") else 3
    z = rng.standard_normal((6, width)) * 2
    z[0, 0] = -40.0  # a probability far below EPSILON: Keras' clip acts
    z[1, 1] = 40.0
    y = draw_targets(rng, goal, (6,), width)
    return _activated(z, goal).astype(np.float32), y


@pytest.mark.parametrize("goal", OBJECTIVES, ids=str)
def test_the_numpy_statement_is_keras_own(goal: Objective) -> None:
    """The judge of the frameworks' losses, judged against the original:
    Keras' loss object on the same outputs (eager, so no backend reaches
    back through an activation)."""
    keras = pytest.importorskip("keras")
    outputs, y = _case(goal)
    if reaches_back(goal, None):
        # The focal loss' own sigmoid: Keras on TensorFlow reaches back through
        # it to the logits and never clips (zoo.losses), Keras' formula and its
        # other backends do; they agree where no probability is below EPSILON.
        outputs = np.clip(outputs, -15.0, 15.0)
    value = float(keras.ops.convert_to_numpy(keras_loss(keras, goal)(y, outputs)))
    assert (
        relative_error(np.float64(value), np.float64(numpy_loss(outputs, y, goal)))
        < 1e-5
    )


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("goal", OBJECTIVES, ids=str)
def test_every_framework_computes_each_loss(framework: str, goal: Objective) -> None:
    pytest.importorskip(framework.split("-", maxsplit=1)[0])
    fw = load_framework(framework)
    outputs, y = _case(goal)
    expected = np.float64(numpy_loss(outputs, y, goal))
    value = fw.to_numpy(fw.loss(fw.to_input(outputs), fw.to_labels(y), goal))
    assert relative_error(np.float64(value.item()), expected) < 1e-5
    # The wrong reading of the same outputs is caught by the same comparison:
    # the other from_logits, each option left at Keras' default (a smoothing
    # or class balancing left out, the focal power of 2), or for a loss of
    # no logits every other one (the log of the outputs only where they are
    # at least 0).
    if LOSSES[goal.loss].takes_logits:
        others = [goal._replace(from_logits=not goal.from_logits)]
        default = Objective()
        others += [
            goal._replace(**{option: getattr(default, option)})
            for option in LOSSES[goal.loss].options
            if getattr(goal, option) != getattr(default, option)
        ]
        if goal.loss == "binary_focal_crossentropy":  # not the plain one
            others.append(Objective("binary_crossentropy", goal.from_logits))
    else:
        others = [
            Objective(name, False)
            for name, facts in LOSSES.items()
            if not facts.takes_logits
            and name != goal.loss
            and (not facts.positive or bool((outputs >= 0).all()))
        ]
    for other in others:
        wrong = fw.to_numpy(fw.loss(fw.to_input(outputs), fw.to_labels(y), other))
        assert relative_error(np.float64(wrong.item()), expected) > 1e-3, other


def _numpy_paired_terms(o: np.ndarray, t: np.ndarray, loss: str) -> np.ndarray:
    """The magnitudes of each row's terms (``zoo.losses.PAIRED``'s comment)."""
    if loss == "hinge":
        return np.asarray((1 + np.abs(t * o)).mean(axis=1))
    if loss == "poisson":
        return np.asarray((np.abs(o) + np.abs(t * np.log(o + EPSILON))).mean(axis=1))
    if loss == "kl_divergence":
        t, p = np.clip(t, EPSILON, 1), np.clip(o, EPSILON, 1)
        return np.asarray((np.abs(t * np.log(t)) + np.abs(t * np.log(p))).sum(axis=1))
    unit_t = t / np.linalg.norm(t, axis=1, keepdims=True)
    unit_o = o / np.linalg.norm(o, axis=1, keepdims=True)
    return np.asarray(np.abs(unit_t * unit_o).sum(axis=1))


@pytest.mark.parametrize(
    "framework", [i.removeprefix("native-") for i in IMPLEMENTATIONS]
)
@pytest.mark.parametrize("loss", PAIRED)
def test_a_perturbed_run_adds_the_rounding_of_a_paired_loss_terms(
    framework: str, loss: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 08de0aec85: a KL divergence of two nearly equal distributions
    is far smaller than its terms, so float32 errs on it by their rounding,
    which no draw of perturbed outputs sets (a softmax moved through its
    logits stays a distribution, where the divergence is at its minimum).  A
    perturbed reference run adds the unit roundoff times the terms'
    magnitudes to each row (``zoo.losses.PAIRED``'s comment), here at a
    scale float32 shows; the magnitudes of the row as written (``t log(t /
    p)``, cancelled already) would be caught as wrong."""
    pytest.importorskip(framework)
    fw = load_framework(framework)
    goal = Objective(loss, False)
    outputs, y = _case(goal)
    if loss == "kl_divergence":  # nearly the targets: the terms cancel
        outputs = y * (1 + 1e-3 * np.cos(np.arange(y.size)).reshape(y.shape))
        outputs = (outputs / outputs.sum(axis=1, keepdims=True)).astype(np.float32)
    plain = fw.to_numpy(fw.loss(fw.to_input(outputs), fw.to_labels(y), goal)).item()
    scale = 1e-3
    monkeypatch.setattr(compose, "PERTURB_SEED", 1)
    monkeypatch.setattr(compose, "PERTURBATION", scale)
    moved = fw.to_numpy(fw.loss(fw.to_input(outputs), fw.to_labels(y), goal)).item()
    o, t = outputs.astype(np.float64), y.astype(np.float64)
    expected = scale * _numpy_paired_terms(o, t, loss).mean()
    assert relative_error(np.float64(moved - plain), np.float64(expected)) < 1e-3
    if loss == "kl_divergence":
        assert expected > 100 * scale * abs(plain)  # terms far beyond the row
        as_written = scale * np.abs(t * np.log(t / o)).sum(axis=1).mean()
        assert relative_error(np.float64(moved - plain), as_written) > 0.5


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_small_cross_entropy_from_logits_keeps_its_digits(framework: str) -> None:
    """Issue 74's campaign (finding 6613038fa1): a binary cross-entropy from
    logits far on the right side is ``log(1 + exp(z))`` at z well below 0;
    MXNet's ``softrelu`` rounds ``1 + exp(z)`` first, 3e-3 off at z = -9,
    and native MXNet's loss with it."""
    pytest.importorskip(framework.split("-", maxsplit=1)[0])
    fw = load_framework(framework)
    goal = Objective("binary_crossentropy", True)
    outputs = np.array([[-9.0, -7.0, -5.0]], np.float32)
    y = np.zeros((1, 3), np.float32)
    expected = np.float64(numpy_loss(outputs, y, goal))
    value = fw.to_numpy(fw.loss(fw.to_input(outputs), fw.to_labels(y), goal))
    assert relative_error(np.float64(value.item()), expected) < 1e-5


def test_keras_compile_configs_are_read() -> None:
    assert from_keras("mse") == Objective("mean_squared_error", False)
    assert from_keras("sparse_categorical_crossentropy") == Objective(
        "sparse_categorical_crossentropy", False
    )
    saved = {
        "module": "keras.losses",
        "class_name": "BinaryCrossentropy",
        "config": {"from_logits": True, "label_smoothing": 0.0, "axis": -1},
    }
    assert from_keras(saved) == Objective("binary_crossentropy", True)
    function = {"module": "builtins", "class_name": "function", "config": "mae"}
    assert from_keras(function) == Objective("mean_absolute_error", False)
    assert from_keras("huber") == Objective("huber", False)
    assert from_keras("log_cosh") == Objective("log_cosh", False)
    assert from_keras("KLD") == Objective("kl_divergence", False)
    for cls, name in (
        ("Huber", "huber"),
        ("LogCosh", "log_cosh"),
        ("Hinge", "hinge"),
        ("Poisson", "poisson"),
        ("KLDivergence", "kl_divergence"),
        ("CosineSimilarity", "cosine_similarity"),
    ):
        saved = {"class_name": cls, "config": {"reduction": "sum_over_batch_size"}}
        assert from_keras(saved) == Objective(name, False)
    smoothed = {
        "class_name": "CategoricalCrossentropy",
        "config": {"from_logits": True, "label_smoothing": 0.1, "axis": -1},
    }
    assert from_keras(smoothed) == Objective(
        "categorical_crossentropy", True, label_smoothing=0.1
    )
    focal = {  # as Keras 3.15 saves BinaryFocalCrossentropy(gamma=3)
        "class_name": "BinaryFocalCrossentropy",
        "config": {
            "apply_class_balancing": False,
            "alpha": 0.25,
            "gamma": 3.0,
            "from_logits": False,
            "label_smoothing": 0.0,
            "axis": -1,
            "reduction": "sum_over_batch_size",
        },
    }
    assert from_keras(focal) == Objective("binary_focal_crossentropy", False, gamma=3.0)
    balanced = focal | {"config": focal["config"] | {"apply_class_balancing": True}}
    assert from_keras(balanced) == Objective(
        "binary_focal_crossentropy", False, gamma=3.0, alpha=0.25
    )


@pytest.mark.parametrize(
    ("loss", "said"),
    [
        ("squared_hinge", "loss 'squared_hinge'"),
        (
            {"class_name": "CosineSimilarity", "config": {"axis": 1}},
            "axis=1",
        ),
        (["mse"], "loss \\['mse'\\]"),
        ({"d": "mse"}, "loss"),
        (
            {
                "class_name": "CategoricalCrossentropy",
                "config": {"axis": 0},
            },
            "axis=0",
        ),
        (
            {"class_name": "MeanSquaredError", "config": {"reduction": "sum"}},
            "reduction='sum'",
        ),
        ({"class_name": "Huber", "config": {"delta": 2.0}}, "delta=2.0"),
    ],
)
def test_a_loss_the_tool_does_not_compute_is_refused(loss: object, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        from_keras(loss)


def test_a_loss_needs_outputs_it_can_take() -> None:
    check(Objective("binary_crossentropy", False), 1)
    with pytest.raises(ValueError, match="needs at least 2"):
        check(Objective("sparse_categorical_crossentropy", False), 1)
    with pytest.raises(ValueError, match="takes no from_logits"):
        check(Objective("mean_squared_error", True), 1)
    with pytest.raises(ValueError, match="not one the tool writes out"):
        check(Objective("squared_hinge", False), 3)
    with pytest.raises(ValueError, match="needs at least 2"):
        check(Objective("cosine_similarity", False), 1)
    check(Objective("binary_focal_crossentropy", True, 0.1, 1.0, 0.5), 1)
    with pytest.raises(ValueError, match="takes no label_smoothing; leave it out"):
        check(Objective("sparse_categorical_crossentropy", label_smoothing=0.1), 2)
    with pytest.raises(ValueError, match="takes no gamma or alpha; leave it out"):
        check(Objective("binary_crossentropy", True, gamma=1.0, alpha=0.5), 1)
    with pytest.raises(ValueError, match=r"label_smoothing 1\.5 must be in \[0, 1\]"):
        check(Objective("categorical_crossentropy", True, 1.5), 2)
    with pytest.raises(ValueError, match=r"gamma -1\.0 must be at least 0"):
        check(Objective("binary_focal_crossentropy", True, gamma=-1.0), 1)


def test_a_loss_of_the_outputs_log_needs_outputs_of_at_least_zero() -> None:
    """Poisson takes the log of the outputs: a model that ends linear is
    refused in one sentence that names the activations it may end in."""
    goal = Objective("poisson", False)
    for positive in ("softplus", "relu", "softmax"):
        check_outputs(goal, positive)
    with pytest.raises(ValueError, match=r"ends in linear outputs.*softplus"):
        check_outputs(goal, None)
    with pytest.raises(ValueError, match="ends in tanh outputs"):
        check_outputs(goal, "tanh")
    check_outputs(Objective("mean_squared_error", False), None)


@pytest.mark.parametrize("targets", ["signs", "counts", "distribution"])
def test_each_kind_of_target_is_drawn_as_it_is_said(targets: str) -> None:
    loss = next(n for n, f in LOSSES.items() if f.targets == targets)
    y = draw_targets(np.random.default_rng(0), Objective(loss, False), (50,), 4)
    assert y.shape == (50, 4)
    assert y.dtype == np.float32
    if targets == "signs":
        assert set(np.unique(y)) == {-1.0, 1.0}
    elif targets == "counts":
        assert (y >= 0).all()
        assert (y == np.round(y)).all()
        assert y.max() > 1
    else:
        assert (y > 0).all()
        assert np.allclose(y.sum(axis=1), 1, atol=1e-6)


def _per_step_case(goal: Objective) -> tuple[np.ndarray, np.ndarray]:
    """Outputs of 3 examples of 5 steps each (a tagger's or a forecaster's
    row per step, issue 78) and a target per step."""
    rng = np.random.default_rng(11)
    width = 4 if goal.loss.endswith("categorical_crossentropy") else 3
    z = rng.standard_normal((3, 5, width)) * 2
    y = draw_targets(rng, goal, (3, 5), width)
    return _activated(z, goal).astype(np.float32), y


def _rows(outputs: np.ndarray, y: np.ndarray, goal: Objective) -> tuple[Any, Any]:
    width = outputs.shape[-1]
    ids = goal.loss.startswith("sparse")
    return outputs.reshape(-1, width), y.reshape(-1) if ids else y.reshape(-1, width)


@pytest.mark.parametrize("goal", OBJECTIVES, ids=str)
def test_a_loss_per_step_is_keras_mean_over_every_step(goal: Objective) -> None:
    """Keras' loss of a row per step is the mean of every step's row loss
    over the batch and the steps: the NumPy statement on the steps as rows
    is Keras' own on the sequence; summing the steps instead is not."""
    keras = pytest.importorskip("keras")
    outputs, y = _per_step_case(goal)
    value = np.float64(keras.ops.convert_to_numpy(keras_loss(keras, goal)(y, outputs)))
    assert (
        relative_error(value, np.float64(numpy_loss(*_rows(outputs, y, goal), goal)))
        < 1e-5
    )
    summed = sum(numpy_loss(outputs[:, t], y[:, t], goal) for t in range(5))
    assert relative_error(value, np.float64(summed)) > 1e-3


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("goal", OBJECTIVES, ids=str)
def test_every_framework_computes_each_loss_per_step(
    framework: str, goal: Objective
) -> None:
    pytest.importorskip(framework.split("-", maxsplit=1)[0])
    fw = load_framework(framework)
    outputs, y = _per_step_case(goal)
    expected = np.float64(numpy_loss(*_rows(outputs, y, goal), goal))
    value = fw.to_numpy(fw.loss(fw.to_input(outputs), fw.to_labels(y), goal))
    assert relative_error(np.float64(value.item()), expected) < 1e-5


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("goal", OBJECTIVES, ids=str)
def test_every_framework_computes_each_loss_per_pixel(
    framework: str, goal: Objective
) -> None:
    """A row per pixel, in Keras' order (``ops.outputs`` gives every
    layout's model output so): the mean of every pixel's row loss."""
    pytest.importorskip(framework.split("-", maxsplit=1)[0])
    fw = load_framework(framework)
    steps, y = _per_step_case(goal)  # 3 examples of 5 positions
    pixels = steps.reshape(3, 5, 1, -1)  # (N, H, W, C): 5 rows of 1 pixel
    targets = y.reshape(3, 5, 1, *y.shape[2:])
    expected = np.float64(numpy_loss(*_rows(steps, y, goal), goal))
    # to_labels keeps the array's layout (to_input would make it NCHW)
    value = fw.to_numpy(fw.loss(fw.to_labels(pixels), fw.to_labels(targets), goal))
    assert relative_error(np.float64(value.item()), expected) < 1e-5
