"""Reading one layer's Keras config: the checks every kind's ``read`` shares.

A Keras archive's ``config.json`` writes each layer as ``{"class_name",
"module", "config", ...}``.  A kind's ``read`` (``zoo.kinds.base.Kind``)
turns the ``config`` into the document's words and refuses, in one
sentence, an option the tool does not compute; the helpers here are the
words several kinds share.  Standard library only (``zoo.keras_import``
reads configs before any Keras is imported).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zoo.kinds.base import ACTIVATIONS

# Keras' activation names the tool computes (``linear`` is no activation;
# Keras' ``swish`` is ``silu``).
KERAS_ACTIVATIONS = ("linear", *(a for a in ACTIVATIONS if a))
ALIASES = {"swish": "silu"}
REGULARIZED = (
    ("activity_regularizer", None),
    ("kernel_constraint", None),
    ("bias_constraint", None),
)
CHANNELS_LAST = (("data_format", "channels_last"),)
RECURRENT = (
    ("recurrent_activation", "sigmoid"),
    ("return_state", False),
    ("go_backwards", False),
    ("stateful", False),
    ("unroll", False),
    ("recurrent_constraint", None),
    *REGULARIZED,
)
# Keras' regularizer argument -> the parameter role it penalizes, for the
# usual kernel and bias (a kind with other roles writes its own table).
KERNEL_AND_BIAS = {"kernel_regularizer": "kernel", "bias_regularizer": "bias"}
# The regularizer classes the tool computes: Keras' L1, L2 and L1L2, whose
# term in the loss is ``l1 * sum(|w|) + l2 * sum(w ** 2)`` (no 1/2).
PENALTIES = ("L1", "L2", "L1L2")
# Each one's (l1, l2) when its config leaves a factor out (Keras' defaults).
DEFAULT_FACTORS = {"L1": (0.01, 0.0), "L2": (0.0, 0.01), "L1L2": (0.0, 0.0)}


def is_default(value: Any, default: Any) -> bool:
    """Whether ``value`` is ``default``, or Keras' list of it per axis
    (a dilation of ``[1, 1]``)."""
    if value == default:
        return True
    return isinstance(value, list) and bool(value) and all(v == default for v in value)


def must(cls: str, name: str, config: Mapping[str, Any], table: Any) -> None:
    """Refuse the first option of ``table`` (``(option, default)`` pairs)
    that ``config`` sets to something else: the tool would compute another
    layer."""
    for option, default in table:
        value = config.get(option, default)
        if not is_default(value, default):
            raise ValueError(
                f"{cls} layer {name!r} has {option}={value!r}, which the tool does "
                f"not compute; it needs {option}={default!r}"
            )


def pair(value: Any, what: str, name: str) -> int:
    """A square option (``3`` or ``[3, 3]``) as one number."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, list) and len(value) == 2 and value[0] == value[1]:
        return int(value[0])
    raise ValueError(
        f"layer {name!r} has {what} {value!r}; only square windows and strides "
        "are supported"
    )


def single(value: Any, what: str, name: str) -> int:
    """A 1-D option (``3`` or ``[3]``) as one number."""
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError(f"layer {name!r} has {what} {value!r}; it must be one number")


def activation(name: str, config: Mapping[str, Any], key: str = "activation") -> str:
    """A layer's activation by Keras' name, checked to be one the tool
    computes (``swish`` read as ``silu``)."""
    given = config.get(key, "linear")
    if not isinstance(given, str):
        # A function object (a lambda, gelu with approximate=True through
        # functools.partial) serializes as a table, never as a built-in's name.
        raise ValueError(
            f"layer {name!r} has an activation function of its own, not a "
            f"built-in's name (the exact gelu is 'gelu'); supported: "
            f"{', '.join(KERAS_ACTIVATIONS)}"
        )
    given = ALIASES.get(given, given)
    if given not in KERAS_ACTIVATIONS:
        raise ValueError(
            f"layer {name!r} has activation {given!r}; supported: "
            f"{', '.join(KERAS_ACTIVATIONS)}"
        )
    return given


def bias_words(config: Mapping[str, Any]) -> dict[str, Any]:
    """``use_bias`` in the document when the layer has none (the default,
    a bias, is not written, so documents of older files keep their digest)."""
    return {} if config.get("use_bias", True) else {"use_bias": False}


def window(cls: str, name: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """A convolution's or pool's window, step and padding in document words."""
    read = pair if "2D" in cls else single
    entry: dict[str, Any] = {"padding": config.get("padding", "valid")}
    if "Pool" not in cls:
        entry["filters"] = config.get("filters")
        entry["kernel_size"] = read(config.get("kernel_size"), "kernel_size", name)
        entry["strides"] = read(config.get("strides", 1), "strides", name)
        return entry
    size = read(config.get("pool_size"), "pool_size", name)
    strides = config.get("strides")
    entry["pool_size"] = size
    entry["strides"] = size if strides is None else read(strides, "strides", name)
    return entry


def regularizers(
    cls: str, name: str, config: Mapping[str, Any], table: Mapping[str, str]
) -> dict[str, Any]:
    """A layer's weight regularizers (``table``: Keras' argument -> the
    parameter role) as the document's ``regularize``: ``[role, l1, l2]``
    each; none: no word, so documents of older files keep their digest."""
    found = []
    for argument, role in table.items():
        given = config.get(argument)
        if given is None:
            continue
        if isinstance(given, str) and given in ("l1", "l2"):  # Keras' shorthand
            given = {"class_name": given.upper(), "config": {}}
        if not isinstance(given, Mapping) or given.get("class_name") not in PENALTIES:
            shown = given.get("class_name") if isinstance(given, Mapping) else given
            raise ValueError(
                f"{cls} layer {name!r} has {argument}={shown!r}; the tool computes "
                f"Keras' {', '.join(PENALTIES)} regularizers only"
            )
        factors = given.get("config") or {}
        l1, l2 = DEFAULT_FACTORS[given["class_name"]]
        l1, l2 = factors.get("l1", l1), factors.get("l2", l2)
        found.append([role, float(l1 or 0.0), float(l2 or 0.0)])
    return {"regularize": found} if found else {}


def regularizer_args(
    keras: Any, layer: Any, table: Mapping[str, str]
) -> dict[str, Any]:
    """Keras' regularizer arguments for ``layer.regularize`` (``table`` as in
    ``regularizers``): an ``L1L2`` per penalized role."""
    by_role = {role: (l1, l2) for role, l1, l2 in layer.regularize}
    return {
        argument: keras.regularizers.L1L2(l1=by_role[role][0], l2=by_role[role][1])
        for argument, role in table.items()
        if role in by_role
    }
