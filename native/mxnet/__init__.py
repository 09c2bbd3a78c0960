"""The four reference models from low-level MXNet operators (``nd``/``sym``).

Runs only in the MXNet environment (mxnet 1.9.1 with NumPy 1.23).  Each model's
forward pass is written once and picks its operator namespace from its input
(``native.mxnet.ops.namespace``), so the same code runs imperatively
(``mx.nd``, path ``native-mxnet``) and compiled in a hybridized
``HybridBlock`` (``mx.sym``, path ``native-mxnet-hybrid``, ``hybrid.py``).
"""
