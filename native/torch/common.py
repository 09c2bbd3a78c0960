"""What every native PyTorch model shares: weights, loss, gradients, optimizers.

Layouts (family ``oihw``, see ``native.layout``): dense kernels ``(out, in)``
as ``F.linear`` wants them, conv kernels ``(out, in, kh, kw)``, image batches
``(N, C, H, W)``.  Parameters are a plain ``dict[str, Tensor]`` keyed by the
canonical names, each a leaf tensor with ``requires_grad``.

The optimizers (``zoo.optimizers.OPTIMIZERS``) follow Keras 3's update
formulas exactly, written out with PyTorch's operators, each in place on the
parameters and its slots under ``no_grad``:

- weight decay (any optimizer, ``weight_decay`` not 0; ``adamw``'s default
  0.004): ``w -= w * weight_decay * lr`` on every trained parameter before
  the update, never on a batch normalization's moving statistics.
- SGD: ``w -= lr * g``; with ``momentum`` ``b = b * momentum - lr * g``, then
  ``w += b`` (``nesterov``: ``w += b * momentum - lr * g``).
- Adam and AdamW: ``m += (g - m) * (1 - b1)``; ``v += (g*g - v) * (1 - b2)``
  (``amsgrad``: ``vh = max(vh, v)`` takes ``v``'s place below);
  ``w -= m * lr * sqrt(1 - b2**t) / (1 - b1**t) / (sqrt(v) + eps)``, so the
  bias correction is folded into the step size and ``eps`` sits outside the
  square root, unlike ``torch.optim.Adam`` (inside, ``sqrt(v + eps)``, when
  the workload's ``epsilon_inside_sqrt`` says so).
- RMSprop: ``v = rho * v + (1 - rho) * g*g``; ``w -= lr * g / sqrt(v + eps)``,
  or ``sqrt(v - a*a + eps)`` with ``centered`` (``a = rho * a + (1 - rho) *
  g``), through ``b = momentum * b + ...`` when ``momentum > 0``.
- Adagrad: ``s += g*g`` from ``initial_accumulator_value``;
  ``w -= lr * g / sqrt(s + eps)``.
- Nadam: Adam's moments with the momentum schedule ``u(t) = b1 * (1 - 0.5 *
  0.96**t)`` and its running product, one number for the whole model.

Keras' gradient clipping (``clipped``) comes first, and a learning-rate
schedule gives each step its rate (``learning_rate``); a frozen layer's
parameters are set to themselves (``native.compose``): no gradient taken,
no step.  A ``TrainState`` keeps only the slots its optimizer uses, by
Keras' names (plain SGD none; Adam ``momentum`` and ``velocity``).

``HARNESS_NATIVE_DTYPE=float64`` in a worker's environment makes every
parameter and input float64: the same model, weights and data computed in
double precision, the reference the equivalence checker judges every path
against (``equivalence.reference``).  Nothing else differs.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import native
from native import compose
from native.compose import train_forward
from native.protocol import Apply
from zoo.losses import EPSILON, PAIRED, Heads, Objective, smoothed, total
from zoo.optimizers import OPTIMIZERS, slot_names
from zoo.specs import Workload

LAYOUT = "oihw"
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
DTYPE = {"float32": torch.float32, "float64": torch.float64}[
    os.environ.get("HARNESS_NATIVE_DTYPE", "float32")
]
Params = dict[str, torch.Tensor]


def init(arrays: Mapping[str, np.ndarray]) -> Params:
    return {
        name: torch.tensor(a, dtype=DTYPE, device=DEVICE).requires_grad_()
        for name, a in arrays.items()
    }


def arrays(params: Params) -> Params:
    # Detached views of the same memory: a pass over them records no graph.
    return {name: p.detach() for name, p in params.items()}


def to_input(x: np.ndarray) -> torch.Tensor:
    if x.ndim == 4:
        x = x.transpose(0, 3, 1, 2)  # (N, H, W, C) -> (N, C, H, W)
    if np.issubdtype(x.dtype, np.integer):  # token ids (N, T)
        return torch.tensor(x, dtype=torch.int64, device=DEVICE)
    return torch.tensor(np.ascontiguousarray(x), dtype=DTYPE, device=DEVICE)


def to_labels(y: np.ndarray) -> torch.Tensor:
    if np.issubdtype(y.dtype, np.integer):  # class ids (N,)
        return torch.tensor(y, dtype=torch.int64, device=DEVICE)
    return torch.tensor(y, dtype=DTYPE, device=DEVICE)  # float rows (N, K)


def _rows(
    outputs: torch.Tensor, y: torch.Tensor, name: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """A model with a row of outputs per position, ``(N, T, C)`` per step or
    ``(N, H, W, C)`` per pixel (Keras' order: ``ops.outputs``): every
    position's row and target as rows of their own (Keras takes the mean
    over them all)."""
    if outputs.ndim <= 2:
        return outputs, y
    width = outputs.shape[-1]
    ids = name == "sparse_categorical_crossentropy"
    return outputs.reshape((-1, width)), y.reshape((-1,) if ids else (-1, width))


def loss(outputs: Any, y: Any, objective: Objective | Heads) -> torch.Tensor:
    """The training loss of ``objective`` (one output's, or several
    outputs' weighted sum: ``zoo.losses.total``) of ``_one_loss``."""
    return total(_one_loss, outputs, y, objective)  # type: ignore[no-any-return]


def _one_loss(
    outputs: torch.Tensor, y: torch.Tensor, objective: Objective
) -> torch.Tensor:
    """The batch mean of ``objective``'s loss, Keras' formulas (``zoo.losses``)."""
    name, from_logits = objective.loss, objective.from_logits
    outputs, y = _rows(outputs, y, name)
    y = smoothed(y, objective, outputs.shape[-1])
    if name.endswith("categorical_crossentropy"):
        if from_logits:
            log_probs = torch.log_softmax(outputs, dim=1)
        else:  # probabilities: rescaled to sum 1, clipped, as Keras does
            p = outputs / outputs.sum(dim=1, keepdim=True)
            log_probs = p.clamp(EPSILON, 1 - EPSILON).log()
        if name == "sparse_categorical_crossentropy":
            return -log_probs.gather(1, y[:, None]).mean()
        return -(y * log_probs).sum(dim=1).mean()
    if name == "binary_focal_crossentropy":
        return _focal(outputs, y, objective).mean(dim=1).mean()
    if name == "binary_crossentropy":
        if from_logits:
            log_p, log_not_p = F.logsigmoid(outputs), F.logsigmoid(-outputs)
        else:
            p = outputs.clamp(EPSILON, 1 - EPSILON)
            log_p, log_not_p = p.log(), (1 - p).log()
        return -(y * log_p + (1 - y) * log_not_p).mean(dim=1).mean()
    if name in PAIRED:
        return _paired(name, outputs, y).mean()
    return _regression(name, outputs - y).mean(dim=1).mean()


def _focal(z: torch.Tensor, y: torch.Tensor, objective: Objective) -> torch.Tensor:
    """The binary focal cross-entropy of each output (``zoo.losses``)."""
    p = torch.sigmoid(z) if objective.from_logits else z
    q = p.clamp(EPSILON, 1 - EPSILON)
    bce = -(y * q.log() + (1 - y) * (1 - q).log())
    p_t = y * p + (1 - y) * (1 - p)
    focal = (1 - p_t) ** objective.gamma * bce
    if objective.alpha is None:
        return focal
    return focal * (y * objective.alpha + (1 - y) * (1 - objective.alpha))


def _paired(name: str, o: Any, t: Any) -> Any:
    """The loss of each row for the losses that take outputs ``o`` and
    targets ``t`` apart (``zoo.losses``; a perturbed run's rounding of their
    terms added: ``native.compose.loss_rows``)."""
    return compose.loss_rows(_paired_rows, _paired_terms, name, o, t)


def _paired_rows(name: str, o: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """``_paired``'s rows as Keras computes them (``zoo.losses``)."""
    if name == "hinge":  # targets of -1 or 1
        return (1.0 - t * o).clamp(min=0.0).mean(dim=1)
    if name == "poisson":
        return (o - t * (o + EPSILON).log()).mean(dim=1)
    if name == "kl_divergence":
        t, p = t.clamp(EPSILON, 1.0), o.clamp(EPSILON, 1.0)
        return (t * (t / p).log()).sum(dim=1)
    if name == "cosine_similarity":
        return -(_unit(t) * _unit(o)).sum(dim=1)
    raise ValueError(f"unknown loss {name!r}")


def _paired_terms(name: str, o: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """The magnitudes of the terms each row of ``_paired`` adds up, summed as
    the row sums them (``zoo.losses.PAIRED``'s comment)."""
    if name == "hinge":
        return (1.0 + (t * o).abs()).mean(dim=1)
    if name == "poisson":
        return (o.abs() + (t * (o + EPSILON).log()).abs()).mean(dim=1)
    if name == "kl_divergence":
        t, p = t.clamp(EPSILON, 1.0), o.clamp(EPSILON, 1.0)
        return ((t * t.log()).abs() + (t * p.log()).abs()).sum(dim=1)
    return (_unit(t) * _unit(o)).abs().sum(dim=1)  # cosine_similarity


def _unit(x: torch.Tensor) -> torch.Tensor:
    """Each row of ``x`` over its length, as Keras' ``ops.normalize``."""
    inverse = torch.rsqrt((x**2).sum(dim=1, keepdim=True))
    return x * inverse.clamp(max=1.0 / EPSILON)


def _regression(name: str, x: torch.Tensor) -> torch.Tensor:
    """A regression loss of each output's error ``x = o - t``."""
    if name == "mean_squared_error":
        return x**2
    if name == "mean_absolute_error":
        return x.abs()
    if name == "huber":  # delta 1
        return torch.where(x.abs() <= 1.0, 0.5 * x**2, x.abs() - 0.5)
    if name == "log_cosh":  # x + softplus(-2x) - log 2, the softplus stably
        z = -2.0 * x
        return x + z.clamp(min=0) + torch.log1p(torch.exp(-z.abs())) - math.log(2.0)
    raise ValueError(f"unknown loss {name!r}")


Penalties = tuple[tuple[str, float, float], ...]


def penalty(params: Mapping[str, torch.Tensor], penalties: Penalties) -> torch.Tensor:
    """The weight penalties (``native.penalties_of``), Keras' ``L1L2`` with no
    1/2: ``l1 * sum(|w|) + l2 * sum(w ** 2)`` of each parameter, summed; a
    factor of 0 adds no term, as in Keras.  Only called when ``penalties``
    is not empty: a model without them keeps its loss (and program) as is."""
    terms = []
    for name, l1, l2 in penalties:
        w = params[name]
        if l1:
            terms.append(l1 * w.abs().sum())
        if l2:
            terms.append(l2 * w.square().sum())
    if not terms:  # every factor 0
        return next(iter(params.values())).new_zeros(())
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


def loss_and_grads(
    apply: Apply, params: Params, x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, Params]:
    logits = apply(params, x)
    value = loss(logits, y, native.objective_of(apply))
    if penalties := native.penalties_of(apply):
        value = value + penalty(params, penalties)
    grads = torch.autograd.grad(value, list(params.values()))
    return logits, value, dict(zip(params, grads, strict=True))


@torch.inference_mode()
def inference(apply: Apply, params: Params, x: torch.Tensor) -> torch.Tensor:
    return apply(params, x)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    # Always a copy (which waits for the value): on the CPU ``numpy()`` alone
    # would share memory with parameters that the optimizer updates in place.
    return t.detach().to("cpu", copy=True).numpy()


Slots = dict[str, Params]


@dataclass
class TrainState:
    params: Params
    # Keras' slot name -> one array per parameter, only the slots the
    # workload's optimizer uses (``zoo.optimizers.slot_names``): none for
    # plain SGD, Adam's ``momentum`` and ``velocity``.
    slots: Slots
    # Nadam's running product of its momentum schedule, one number for the
    # whole model: a CPU scalar in the parameters' dtype (None otherwise).
    u_product: torch.Tensor | None
    step: int  # count of steps taken
    workload: Workload


def _dtype(params: Params) -> torch.dtype:
    """The parameters' dtype, which Keras computes an optimizer's scalars in."""
    return next(iter(params.values())).dtype if params else DTYPE


def make_train_state(params: Params, workload: Workload) -> TrainState:
    """``params`` with the slots of ``workload``'s optimizer at step 0, each
    parameter's shape: zeros, but Adagrad's accumulator filled with
    ``initial_accumulator_value`` (as Keras' Constant initializer); a
    ValueError for an optimizer ``zoo.optimizers`` does not know."""

    def start(slot: str) -> float:
        return workload.initial_accumulator_value if slot == "accumulator" else 0.0

    slots = {
        slot: {k: torch.full_like(p, start(slot)) for k, p in params.items()}
        for slot in slot_names(workload)
    }
    u_product = (
        torch.ones((), dtype=_dtype(params)) if workload.optimizer == "nadam" else None
    )
    return TrainState(params, slots, u_product, 0, workload)


def state_params(state: TrainState) -> Params:
    return state.params


def learning_rate(state: TrainState) -> float:
    """The rate of this step: the workload's, or its schedule's
    (``zoo.optimizers``) at the count of steps taken (Keras' ``iterations``,
    0 for the first), computed in the parameters' dtype as Keras computes
    it in its variables'."""
    w = state.workload
    s = w.schedule
    if s is None:
        return w.learning_rate
    dtype = _dtype(state.params)

    def scalar(value: float) -> torch.Tensor:
        return torch.tensor(value, dtype=dtype)

    if s.kind == "piecewise_constant_decay":
        below = sum(1 for bound in s.boundaries if state.step > bound)
        return scalar(s.values[below]).item()
    t, lr0 = scalar(state.step), scalar(w.learning_rate)
    if s.kind in ("exponential_decay", "inverse_time_decay"):
        p = t / scalar(s.decay_steps)
        if s.staircase:
            p = p.floor()
        if s.kind == "exponential_decay":
            return (lr0 * scalar(s.decay_rate) ** p).item()
        return (lr0 / (1 + scalar(s.decay_rate) * p)).item()
    # cosine_decay, from lr0, or after a linear warm-up from lr0 to its target
    start, steps = lr0, scalar(s.decay_steps)
    if s.warmup_target:
        target, warmup = scalar(s.warmup_target), scalar(s.warmup_steps)
        t = torch.minimum(t, steps + warmup)
        if state.step < s.warmup_steps:
            return ((target - lr0) * (t / warmup) + lr0).item()
        start, t = target, t - warmup
    else:
        t = torch.minimum(t, steps)
    cosine = 0.5 * (1.0 + torch.cos(scalar(math.pi) * (t / steps)))
    return (start * ((1 - s.alpha) * cosine + s.alpha)).item()


def clipped(w: Workload, grads: Params) -> Params:
    """The gradients as Keras' clipping leaves them (``zoo.optimizers``): by
    each one's norm, by their global norm, or each value; as they are when
    the workload clips none."""
    if w.clipnorm:
        c = w.clipnorm
        return {
            k: g * c / torch.clamp(g.square().sum().sqrt(), min=c)
            for k, g in grads.items()
        }
    if w.global_clipnorm:
        c = w.global_clipnorm
        norm = torch.stack([g.square().sum() for g in grads.values()]).sum().sqrt()
        scale = c * torch.clamp(1.0 / norm, max=1.0 / c) + (norm - norm)
        return {k: g * scale for k, g in grads.items()}
    if w.clipvalue:
        v = w.clipvalue
        return {k: g.clamp(-v, v) for k, g in grads.items()}
    return grads


def _decay(state: TrainState, names: list[str], lr: float) -> None:
    """Keras' weight decay, ``w = w - w * weight_decay * lr`` (two products,
    each rounded in the parameter's dtype), on the parameters ``names``."""
    w = state.workload
    for name in names:
        p = state.params[name]
        p.sub_(p * w.weight_decay * lr)


def _sgd(state: TrainState, grads: Params, lr: float) -> None:
    """SGD: ``w -= lr * g``; with momentum ``b = b * momentum - lr * g``, then
    ``w += b``, or with Nesterov ``w += b * momentum - lr * g``."""
    w = state.workload
    if "momentum" not in state.slots:  # plain SGD: the program as it always was
        for name, g in grads.items():
            state.params[name].sub_(g, alpha=lr)
        return
    momentum = state.slots["momentum"]
    for name, g in grads.items():
        p, b = state.params[name], momentum[name]
        scaled = g * lr
        b.mul_(w.momentum).sub_(scaled)
        p.add_(b * w.momentum - scaled if w.nesterov else b)


def _adam(state: TrainState, grads: Params, lr: float) -> None:
    """Adam (and AdamW, whose decay ``update`` applies first): the moments,
    ``amsgrad``'s running maximum of ``v``, and the step with the bias
    correction folded into ``alpha``."""
    w = state.workload
    # As Keras computes it: the powers of beta in the parameters' dtype (in
    # float32, 0.999 is 0.99900001, which moves sqrt(1 - beta_2**t) by 6e-6).
    t = torch.tensor(state.step + 1, dtype=_dtype(state.params))
    alpha = (lr * (1 - w.beta_2**t).sqrt() / (1 - w.beta_1**t)).item()
    eps = w.epsilon
    ms, vs = state.slots["momentum"], state.slots["velocity"]
    v_hats = state.slots.get("velocity_hat")
    for name, g in grads.items():
        p, m, v = state.params[name], ms[name], vs[name]
        m.add_(g - m, alpha=1 - w.beta_1)
        v.add_(g * g - v, alpha=1 - w.beta_2)
        if v_hats is not None:  # amsgrad: the largest v so far replaces v
            v_hat = v_hats[name]
            torch.maximum(v_hat, v, out=v_hat)
            v = v_hat
        root = (v + eps).sqrt() if w.epsilon_inside_sqrt else v.sqrt() + eps
        p.sub_(m * alpha / root)


def _rmsprop(state: TrainState, grads: Params, lr: float) -> None:
    """RMSprop: ``v = rho * v + (1 - rho) * g*g`` (centered: less the square
    of ``a = rho * a + (1 - rho) * g``); ``inc = lr * g / sqrt(v + eps)``,
    subtracted, or with momentum accumulated in ``b`` and ``b`` subtracted."""
    w = state.workload
    rho, eps = w.rho, w.epsilon
    vs = state.slots["velocity"]
    averages = state.slots.get("average_gradient")
    momenta = state.slots.get("momentum")
    for name, g in grads.items():
        p, v = state.params[name], vs[name]
        v.mul_(rho).add_(g.square() * (1 - rho))
        if averages is not None:
            a = averages[name].mul_(rho).add_(g * (1 - rho))
            denominator = v - a.square() + eps  # Keras' order: (v - a*a) + eps
        else:
            denominator = v + eps
        increment = g * lr / denominator.sqrt()
        if momenta is not None:
            p.sub_(momenta[name].mul_(w.momentum).add_(increment))
        else:
            p.sub_(increment)


def _adagrad(state: TrainState, grads: Params, lr: float) -> None:
    """Adagrad: ``s += g*g`` (``s`` starting at ``initial_accumulator_value``);
    ``w -= lr * g / sqrt(s + eps)``."""
    w = state.workload
    accumulators = state.slots["accumulator"]
    for name, g in grads.items():
        s = accumulators[name].add_(g.square())
        state.params[name].sub_(g * lr / (s + w.epsilon).sqrt())


def _nadam(state: TrainState, grads: Params, lr: float) -> None:
    """Nadam: first the model's ``u_product *= u(t)``, ``u(t) = beta_1 * (1 -
    0.5 * 0.96**t)``, then per parameter Adam's moments and ``w -= m_hat * lr
    / (sqrt(v_hat) + eps)`` with ``m_hat = u(t+1) * m / (1 - u_product *
    u(t+1)) + (1 - u(t)) * g / (1 - u_product)``, ``v_hat = v / (1 -
    beta_2**t)``."""
    w = state.workload
    assert state.u_product is not None  # make_train_state's, for nadam
    # Every scalar as Keras computes it: CPU scalars in the parameters' dtype
    # (0.96, beta_1 and beta_2 rounded to it, the powers and the products
    # rounded in it), then handed to the per-parameter operators as Python
    # floats, which hold those values exactly.
    dtype = _dtype(state.params)
    t = torch.tensor(state.step + 1, dtype=dtype)
    decay = torch.tensor(0.96, dtype=dtype)
    beta_1 = torch.tensor(w.beta_1, dtype=dtype)
    beta_2 = torch.tensor(w.beta_2, dtype=dtype)
    u_t = beta_1 * (1.0 - 0.5 * decay**t)
    u_next = beta_1 * (1.0 - 0.5 * decay ** (t + 1))
    # The product moves once a step, before any parameter's update reads it,
    # by u(t) itself as Keras' PyTorch backend multiplies (its generic
    # optimizer, ``(u_product * beta_1) * (1 - ...)``, may round 1 ulp apart).
    state.u_product = u_product = state.u_product * u_t
    u_product_next = u_product * u_next
    momentum_scale = u_next.item()
    momentum_divisor = (1 - u_product_next).item()
    gradient_scale = (1 - u_t).item()
    gradient_divisor = (1 - u_product).item()
    velocity_divisor = (1 - beta_2**t).item()
    keep_1, keep_2 = (1 - beta_1).item(), (1 - beta_2).item()
    eps = w.epsilon
    ms, vs = state.slots["momentum"], state.slots["velocity"]
    for name, g in grads.items():
        m, v = ms[name], vs[name]
        m.add_((g - m) * keep_1)
        v.add_((g.square() - v) * keep_2)
        m_hat = m * momentum_scale / momentum_divisor + (
            g * gradient_scale / gradient_divisor
        )
        v_hat = v / velocity_divisor
        state.params[name].sub_(m_hat * lr / (v_hat.sqrt() + eps))


# Each optimizer's step (``zoo.optimizers.OPTIMIZERS``), in place, called by
# ``update`` under ``no_grad``; AdamW is Adam after the weight decay every
# optimizer applies.
_STEPS = {
    "sgd": _sgd,
    "adam": _adam,
    "adamw": _adam,
    "rmsprop": _rmsprop,
    "adagrad": _adagrad,
    "nadam": _nadam,
}
assert set(_STEPS) == set(OPTIMIZERS)


def update(state: TrainState, grads: Params, updates: Params | None = None) -> None:
    """One optimizer step on the state's parameters in place, with Keras'
    formulas (eager in every mode: ``native.torch.modes``): the weight decay
    on the trained parameters (those in ``grads``), then the workload's
    optimizer; ``updates``: the new values of the state parameters the
    training forward pass set (a batch normalization's moving statistics),
    copied in, neither decayed nor trained."""
    updates = updates or {}
    with torch.no_grad():  # every helper above runs under it
        lr = learning_rate(state)
        grads = clipped(state.workload, grads)
        if state.workload.weight_decay:
            # Keras decays every trained variable before any update step.
            _decay(state, [name for name in grads if name not in updates], lr)
        _STEPS[state.workload.optimizer](state, grads, lr)
        for name, value in updates.items():
            if value is not state.params[name]:  # a frozen layer's: held
                state.params[name].copy_(value)
    state.step += 1


def training_grads(
    value: torch.Tensor, params: Params, updates: Params
) -> dict[str, torch.Tensor]:
    """The gradients of the loss ``value`` for the trained parameters: all but the
    state parameters the forward pass set (``updates``)."""
    trained = [name for name in params if name not in updates]
    grads = torch.autograd.grad(value, [params[name] for name in trained])
    return dict(zip(trained, grads, strict=True))


def train_step(
    apply: Apply, state: TrainState, x: torch.Tensor, y: torch.Tensor
) -> TrainState:
    logits, updates = train_forward(apply, state.params, x)
    value = loss(logits, y, native.objective_of(apply))
    if penalties := native.penalties_of(apply):
        value = value + penalty(state.params, penalties)
    update(state, training_grads(value, state.params, updates), updates)
    return state


def sync(value: Any) -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def describe() -> dict[str, Any]:
    return {
        "framework": "torch",
        "framework_version": torch.__version__,
        "device": str(DEVICE),
        "dtype": str(DTYPE).removeprefix("torch."),
        "intra_op_threads": torch.get_num_threads(),
        "inter_op_threads": torch.get_num_interop_threads(),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }
