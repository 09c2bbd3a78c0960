"""``python -m harness``'s commands, one module each (``harness.__main__``
builds the parser from them and dispatches):

- ``run``: time every model on every path (and its executors, local or Slurm);
- ``units``: ``plan``, ``run-cell`` and ``gate``, a run taken apart into units;
- ``floors``: each native path against its framework's idiomatic step;
- ``explain``: Keras' overhead taken apart;
- ``bisect``: the Keras release between two that changed a cell;
- ``ops``: every operator through keras.ops and each framework's own;
- ``selfcheck``: the harness' timer against each framework's;
- ``report``: tables, comparisons and plots from a run's records;
- ``kinds``: the layer kinds the tool computes, from the registry;
- ``common``: what several share (the profile, models, paths and phases).

Each command module has ``add(commands)``, which adds its subparser(s) with
their handler (``set_defaults(handler=...)``, ``(args) -> int``).  None
imports a deep-learning framework; the heavy imports are inside the handlers.
"""
