"""Framework-free descriptions of the four reference models.

This module imports nothing but the standard library, so every environment
(the MXNet one included, with NumPy 1.23 and no Keras) can read it.

A model is a plain sequence of layers.  From that sequence this module derives
the canonical parameter list (name, shape, kind) in Keras layout, which is the
one vocabulary every path uses to exchange weights and gradients:

- dense kernel ``(in, out)``, bias ``(out,)``;
- conv2d kernel ``(kh, kw, in, out)``, bias ``(out,)``;
- a dense layer right after ``flatten`` has kind ``dense_after_flatten`` and
  carries the ``(H, W, C)`` feature shape it flattens, because NCHW frameworks
  must permute its rows;
- LSTM kernel ``(in, 4u)``, recurrent kernel ``(u, 4u)``, bias ``(4u,)``, gates
  in the order ``i, f, c, o``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

KINDS = (
    "dense",
    "dense_after_flatten",
    "bias",
    "conv2d",
    "lstm_kernel",
    "lstm_recurrent_kernel",
    "lstm_bias",
)


@dataclass(frozen=True)
class Layer:
    """One layer of a reference model.

    ``kind`` is one of ``dense``, ``conv2d``, ``avg_pool``, ``max_pool``,
    ``flatten`` and ``lstm``.  ``size`` is units (dense, lstm), filters (conv2d)
    or the pool window; ``kernel`` the square conv kernel side.
    """

    name: str
    kind: str
    size: int = 0
    kernel: int = 0
    padding: str = "valid"
    activation: str | None = None


@dataclass(frozen=True)
class Param:
    """One trainable array in canonical (Keras) layout."""

    name: str
    shape: tuple[int, ...]
    kind: str
    layer: str
    role: str
    feature_shape: tuple[int, int, int] | None = None


@dataclass(frozen=True)
class Workload:
    """Training hyperparameters of a model's default workload.

    ``optimizer`` is ``sgd`` (plain, no momentum) or ``adam``; Adam's constants
    are Keras' defaults, which every hand-written optimizer must use too.  The
    loss is always the mean sparse categorical cross-entropy over logits.

    ``epsilon_inside_sqrt`` places Adam's epsilon: ``False`` is Keras' Adam,
    which divides by ``sqrt(v) + epsilon``; ``True`` is the ``sqrt(v + epsilon)``
    variant some implementations use.  Only the native paths read it (the
    ``adam-eps-inside-sqrt`` fault of ``native.faults`` sets it); Keras' Adam
    is always ``False``.
    """

    dataset: str
    optimizer: str
    learning_rate: float
    batch_size: int
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-7
    epsilon_inside_sqrt: bool = False


@dataclass(frozen=True)
class ModelSpec:
    """Everything a path needs to build and feed one model, with no framework."""

    name: str
    input_shape: tuple[int, ...]
    classes: int
    layers: tuple[Layer, ...]
    workload: Workload
    # The native module that implements this architecture (``native.<fw>.<module>``);
    # empty means the model's own name.  Variants reuse their family's module.
    module: str = ""
    params: tuple[Param, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", _derive_params(self))
        object.__setattr__(self, "module", self.module or self.name)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"{self.name} has no parameter {name!r}")

    def tapped_layers(self) -> tuple[str, ...]:
        """Layers whose outputs are compared when localizing a divergence: all
        but ``flatten``, whose output order differs by design between layouts
        (the next dense layer's output is compared instead)."""
        return tuple(layer.name for layer in self.layers if layer.kind != "flatten")

    def layer(self, name: str) -> Layer:
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(f"{self.name} has no layer {name!r}")


def _conv_out(side: int, kernel: int, padding: str) -> int:
    return side if padding == "same" else side - kernel + 1


def _derive_params(spec: ModelSpec) -> tuple[Param, ...]:
    """Walk the layers, tracking the activation shape, and list the parameters."""
    shape: tuple[int, ...] = spec.input_shape
    flattened_from: tuple[int, int, int] | None = None
    params: list[Param] = []
    for layer in spec.layers:
        n = layer.name
        if layer.kind == "dense":
            (fan_in,) = shape
            kind = "dense" if flattened_from is None else "dense_after_flatten"
            params += [
                Param(
                    f"{n}/kernel",
                    (fan_in, layer.size),
                    kind,
                    n,
                    "kernel",
                    flattened_from,
                ),
                Param(f"{n}/bias", (layer.size,), "bias", n, "bias"),
            ]
            shape, flattened_from = (layer.size,), None
        elif layer.kind == "conv2d":
            h, w, c = shape
            k = layer.kernel
            params += [
                Param(f"{n}/kernel", (k, k, c, layer.size), "conv2d", n, "kernel"),
                Param(f"{n}/bias", (layer.size,), "bias", n, "bias"),
            ]
            shape = (
                _conv_out(h, k, layer.padding),
                _conv_out(w, k, layer.padding),
                layer.size,
            )
        elif layer.kind in ("avg_pool", "max_pool"):
            h, w, c = shape
            shape = (h // layer.size, w // layer.size, c)
        elif layer.kind == "flatten":
            h, w, c = shape
            flattened_from, shape = (h, w, c), (h * w * c,)
        elif layer.kind == "lstm":
            _, features = shape
            u = layer.size
            params += [
                Param(f"{n}/kernel", (features, 4 * u), "lstm_kernel", n, "kernel"),
                Param(
                    f"{n}/recurrent_kernel",
                    (u, 4 * u),
                    "lstm_recurrent_kernel",
                    n,
                    "recurrent_kernel",
                ),
                Param(f"{n}/bias", (4 * u,), "lstm_bias", n, "bias"),
            ]
            shape = (u,)
        else:
            raise ValueError(f"layer {n!r} has unknown kind {layer.kind!r}")
    if shape != (spec.classes,):
        raise ValueError(f"{spec.name} ends in shape {shape}, not ({spec.classes},)")
    return tuple(params)


def _dense(name: str, units: int, activation: str | None = "relu") -> Layer:
    return Layer(name, "dense", units, activation=activation)


def vgg_layers(
    blocks: tuple[tuple[int, ...], ...], dense: tuple[int, ...], classes: int = 10
) -> tuple[Layer, ...]:
    """VGG-style stack: 3x3 'same' ReLU convolutions per block, a 2x2 max-pool
    after each block, flatten, ReLU dense layers, then logits."""
    layers: list[Layer] = []
    for b, filters in enumerate(blocks, start=1):
        for i, f in enumerate(filters, start=1):
            layers.append(Layer(f"block{b}_conv{i}", "conv2d", f, 3, "same", "relu"))
        layers.append(Layer(f"block{b}_pool", "max_pool", 2))
    layers.append(Layer("flatten", "flatten"))
    layers += [_dense(f"fc{i}", u) for i, u in enumerate(dense, start=1)]
    layers.append(_dense("logits", classes, None))
    return tuple(layers)


VGG16_BLOCKS = ((64, 64), (128, 128), (256, 256, 256), (512, 512, 512), (512, 512, 512))
# The Rysia paper's CIFAR-10 network: ten convolutions, four blocks, 512-256 head.
RYSIA_VGG_BLOCKS = ((64, 64), (128, 128), (256, 256, 256), (512, 512, 512))
# VGG16 at a sixteenth of its filters: the same thirteen convolutions in five
# blocks, the same pools and head on the same 32x32 images, some 1/200 of the
# work.  The fast test tier checks the VGG16 family with it (tests/tiers.py).
NARROW_VGG16_BLOCKS = tuple(tuple(f // 16 for f in block) for block in VGG16_BLOCKS)


def _build_models() -> dict[str, ModelSpec]:
    mnist_sgd = Workload("mnist", "sgd", 0.01, 128)
    specs = [
        ModelSpec(
            "ffn",
            (784,),
            10,
            (_dense("fc1", 128), _dense("fc2", 64), _dense("logits", 10, None)),
            mnist_sgd,
        ),
        ModelSpec(
            "lenet",
            (28, 28, 1),
            10,
            (
                Layer("conv1", "conv2d", 6, 5, "valid", "relu"),
                Layer("pool1", "avg_pool", 2),
                Layer("conv2", "conv2d", 16, 3, "valid", "relu"),
                Layer("pool2", "avg_pool", 2),
                Layer("flatten", "flatten"),
                _dense("fc1", 120),
                _dense("fc2", 84),
                _dense("logits", 10, None),
            ),
            Workload("mnist", "adam", 0.001, 200),
        ),
        ModelSpec(
            "vgg16",
            (32, 32, 3),
            10,
            vgg_layers(VGG16_BLOCKS, (512, 512)),
            Workload("cifar10", "adam", 0.01, 128),
        ),
        ModelSpec(
            "lstm",
            (250, 50),
            2,
            (Layer("lstm", "lstm", 128), _dense("logits", 2, None)),
            Workload("imdb", "adam", 0.01, 128),
        ),
    ]
    return {s.name: s for s in specs}


MODELS: dict[str, ModelSpec] = _build_models()

# Configurations reachable by name but not part of the default comparison.
VARIANTS: dict[str, ModelSpec] = {
    "vgg-rysia": ModelSpec(
        "vgg-rysia",
        (32, 32, 3),
        10,
        vgg_layers(RYSIA_VGG_BLOCKS, (512, 256)),
        Workload("cifar10", "adam", 0.01, 128),
        module="vgg16",
    ),
    "vgg16-narrow": ModelSpec(
        "vgg16-narrow",
        (32, 32, 3),
        10,
        vgg_layers(NARROW_VGG16_BLOCKS, (32, 32)),
        Workload("cifar10", "adam", 0.01, 128),
        module="vgg16",
    ),
}


def get_spec(name: str) -> ModelSpec:
    """The spec for ``name``, or a ValueError listing the known names."""
    known = {**MODELS, **VARIANTS}
    if name not in known:
        raise ValueError(
            f"unknown model {name!r}; known models: {', '.join(sorted(known))}"
        )
    return known[name]
