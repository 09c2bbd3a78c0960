"""The registry of layer kinds: every fact the framework-free side knows of a
kind lives in that kind's module here (``zoo.kinds.base.Kind``: its options,
output shape, parameters, FLOPs, Keras layer, Keras reading and table
words), and every other place reads it from ``KINDS``.

A module makes one ``KIND``, or a few closely related ones in ``KINDS``
(the four window pools, the merges): kinds that differ by one word share
their module rather than copy it.  The framework side is one ``ops.py`` per
framework, with a block per kind named as the kind (``native.protocol``);
``tests/test_kinds.py`` checks that every kind has every facet and a block
in every framework.  docs/extending.md says what adding a kind takes.

Standard library only.
"""

from __future__ import annotations

from zoo.kinds import (
    activation,
    adapted,
    attention,
    bidirectional,
    borders,
    conv1d,
    conv2d,
    conv_transpose,
    dense,
    depthwise,
    dot_attention,
    dropout,
    embedding,
    flatten,
    global_pool,
    gru,
    lstm,
    merge,
    normalization,
    pooling,
    prelu,
    rescaling,
    reshape,
    simple_rnn,
)
from zoo.kinds.base import Kind

# The reference models' kinds first, in the order they came (the order
# ``LAYER_KINDS`` has always listed), then the kinds users' models brought.
_ORDER = (
    dense.KIND,
    conv2d.KIND,
    *pooling.KINDS[1::-1],  # avg_pool, max_pool
    flatten.KIND,
    lstm.KIND,
    embedding.KIND,
    conv1d.KIND,
    *pooling.KINDS[:1:-1],  # avg_pool1d, max_pool1d
    global_pool.KINDS[0],
    gru.KIND,
    normalization.LAYER_NORM,
    attention.KIND,
    merge.KINDS[0],  # add
    normalization.BATCH_NORM,
    dropout.KIND,
    global_pool.KINDS[1],
    *merge.KINDS[1:],
    activation.KIND,
    prelu.KIND,
    rescaling.KIND,
    adapted.KIND,
    *reshape.KINDS,
    *borders.KINDS,
    conv_transpose.KIND,
    *depthwise.KINDS,
    bidirectional.KIND,
    dot_attention.KIND,
    simple_rnn.KIND,
)
KINDS: dict[str, Kind] = {kind.name: kind for kind in _ORDER}
# Keras class -> the kind that reads it.
BY_KERAS_CLASS: dict[str, Kind] = {
    cls: kind for kind in _ORDER for cls in kind.keras_classes
}
