"""Times every model on every path and reports the Keras-over-native overhead.

The orchestrator side of this package (planning, launching workers, records,
reports) imports no deep-learning framework; only ``harness.worker`` runs
inside a framework's environment, and it imports the framework lazily.
"""
