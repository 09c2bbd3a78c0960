"""Times every model on every path and reports the Keras-over-native overhead.

The top layer, and the orchestrator: it plans runs, gates them on the
equivalence verdicts (``harness.core.gate``), asks workers (``workers.launch``) to
time them, records, analyses and reports.  It imports no deep-learning
framework; everything that runs inside a framework's process lives in
``workers``.
"""
