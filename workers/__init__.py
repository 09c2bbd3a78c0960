"""The process boundary: every path runs in a worker process of its own.

Orchestrator side (imports no framework):

- ``paths``: the registry of paths and the interpreter of each framework;
- ``launch``: starting a worker with its thread settings, sending typed
  requests, reading typed replies; a worker that fails never takes the
  orchestrator down;
- ``resources``: CPU and memory of a worker, sampled from outside.

Worker side (``python -m workers.serve PATH``, NumPy 1.23-safe, imports its
framework lazily):

- ``serve``: the worker's main loop, one request type -> one runner call;
- ``protocol``: the ``Runner`` interface both runners meet;
- ``keras_runner`` and ``native_runner``: the Keras paths and the native
  paths behind that interface;
- ``timing``: the timing loops; ``runs``: the equivalence checks' training
  loops; ``numerics``: pinned fast-math, determinism and threads;
- ``peak_probe`` (``python -m workers.peak_probe SOURCE SECONDS``): one
  float32 matmul peak, NumPy's or a framework's, as JSON on stdout.

Both sides: ``messages``, one typed request and answer per task.
"""
