"""TensorFlow's graph optimizer, with its oneDNN operations on (the default
on x86 Linux), rewrites ``maximum(x * c, x)`` as ``leaky_relu(x, c)``
whatever ``c`` is; for ``c`` above 1 that is the minimum.  It prints each
value eager and in a ``tf.function`` (a graph) and exits 1 when they
differ.  ``TF_ENABLE_ONEDNN_OPTS=0`` in the environment turns the rewrite
off."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf

x = tf.constant([-1.0, 1.0])
differ = False
for c in (0.5, 2.0):

    def f(x, c=c):
        return tf.maximum(x * c, x)

    eager, graph = f(x).numpy().tolist(), tf.function(f)(x).numpy().tolist()
    print(f"maximum(x * {c}, x) at x = -1, 1: eager {eager}, graph {graph}")
    differ = differ or eager != graph
sys.exit(1 if differ else 0)
