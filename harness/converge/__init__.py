"""``python -m harness converge``: time to accuracy on real data.

Every path trains a model from the canonical weights on the same real
mini-batches in the same order, epoch by epoch, with the very closure the
timing times (``workers.runs.converge``), and is tested after each epoch.
What it adds to the per-step timings: whether the 16 native versions learn
what Keras learns, and how long each path takes to reach a target accuracy.

- ``run``: the data (``zoo.datasets``), the float64 gate (a path that fails
  it is not trained), the paths, then the *ensemble*: runs of native
  PyTorch, JAX and TensorFlow from weights nudged by 64 float32 ulps, which
  vote on who judges and measure how far float32 chaos alone moves an
  accuracy curve; records in ``converge.jsonl``, a line per
  run as it ends.
- ``agreement``: the vote, the allowance the judges set and each path's verdict.
- ``report``: time and steps to target, final accuracy, agreement, and
  accuracy-against-time curves.
"""
