"""Numeric settings a worker pins before it computes anything.

Fast-math modes (TF32 matmuls and convolutions on NVIDIA GPUs, reduced JAX
matmul precision) are always off, so the computation that is timed is the one
the equivalence checks verified.  Deterministic algorithms are turned on only
when asked (``python -m workers.serve PATH --deterministic``, as the
equivalence checks do): on GPUs they can be slower than what users run.

Thread counts are set explicitly for every worker: the orchestrator turns a
profile's ``threads`` into environment variables
(``workers.launch.thread_environment``), which the frameworks read at
start-up (OpenMP, MKL, OpenBLAS, TensorFlow's
``TF_NUM_INTRAOP_THREADS``/``TF_NUM_INTEROP_THREADS``) and which the worker
applies to PyTorch (``torch.set_num_threads``).  XLA on CPU (JAX) sizes its
own pool from the cores it sees; its count is recorded as given.

Each function returns the settings it leaves in force, for the records.
They run inside a worker only (``workers.serve``), where the framework
imports happen, lazily.
"""

from __future__ import annotations

import os
from typing import Any


def deterministic_for(framework: str, modes: set[str], asked: bool) -> bool:
    """Whether a worker of ``framework`` serving paths in ``modes`` turns its
    deterministic algorithms on when ``asked``: not for XLA on TensorFlow,
    where op determinism makes Keras refuse ``jit_compile=True`` (it falls
    back to a plain graph) and the gate would check another mode than the
    one timed."""
    return asked and not (framework == "tensorflow" and "xla" in modes)


def pin_environment(framework: str, deterministic: bool) -> dict[str, Any]:
    """Variables that must be set before the framework is imported."""
    settings: dict[str, Any] = {"deterministic": deterministic}
    if deterministic:
        if framework == "jax":
            flag = "--xla_gpu_deterministic_ops=true"
            flags = os.environ.get("XLA_FLAGS", "")
            if flag not in flags:
                os.environ["XLA_FLAGS"] = f"{flags} {flag}".strip()
            settings["xla_flags"] = os.environ["XLA_FLAGS"]
        elif framework == "torch":
            # cuBLAS needs a fixed workspace to be deterministic.
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        elif framework == "mxnet":
            os.environ["MXNET_ENFORCE_DETERMINISM"] = "1"
            os.environ["MXNET_CUDNN_AUTOTUNE_DEFAULT"] = "0"
            settings["mxnet_enforce_determinism"] = True
    return settings


def pin_framework(framework: str, deterministic: bool) -> dict[str, Any]:
    """Settings made through the framework's own API, after its import."""
    return _PIN[framework](deterministic)


def _pin_jax(deterministic: bool) -> dict[str, Any]:
    import jax

    jax.config.update("jax_default_matmul_precision", "highest")
    # XLA's CPU client sizes its thread pool from the CPUs the process may use
    # when it is created: create it now, while the worker is on its own CPU
    # (workers.launch.release_helpers may let its threads use more later).
    jax.devices()
    return {"jax_default_matmul_precision": "highest"}


def _pin_tensorflow(deterministic: bool) -> dict[str, Any]:
    import tensorflow as tf

    config = tf.config.experimental
    config.enable_tensor_float_32_execution(False)
    if deterministic:
        config.enable_op_determinism()
    return {
        "tensor_float_32_execution": config.tensor_float_32_execution_enabled(),
        "op_determinism": deterministic,
    }


def _pin_torch(deterministic: bool) -> dict[str, Any]:
    import torch

    if "HARNESS_INTRA_OP_THREADS" in os.environ:
        torch.set_num_threads(int(os.environ["HARNESS_INTRA_OP_THREADS"]))
        torch.set_num_interop_threads(int(os.environ["HARNESS_INTER_OP_THREADS"]))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    if deterministic:
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False
    return {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "intra_op_threads": torch.get_num_threads(),
        "inter_op_threads": torch.get_num_interop_threads(),
    }


# Compiled graphs ``torch.compile`` keeps per function before it silently
# runs that function eagerly from then on (PyTorch's default is 8): a worker
# that serves every model and batch size of a path compiles Keras' one step
# function once per model, and each must stay compiled.
TORCH_RECOMPILE_LIMIT = 64


def pin_compiler(framework: str, modes: set[str]) -> dict[str, Any]:
    """Settings of the compilers the worker's paths run (``modes``: their
    execution modes, ``workers.paths.MODES``), after the framework's import.

    Every worker also starts with a compile cache of its own, empty
    (``workers.launch``), so a first step's time is a cold compile in every
    process, not a cache hit of an earlier one."""
    if framework != "torch" or "compile" not in modes:
        return {}
    import torch._dynamo

    config = torch._dynamo.config
    config.recompile_limit = TORCH_RECOMPILE_LIMIT
    # Static shapes, as a process of one model and batch size compiles them.
    # By default the second compile of a function at new shapes makes them
    # symbolic, and Keras' LeNet on PyTorch then failed to compile after
    # ffn in the same process ("cannot determine truth value of Relational").
    config.automatic_dynamic_shapes = False
    return {
        "torch_recompile_limit": config.recompile_limit,
        "torch_automatic_dynamic_shapes": config.automatic_dynamic_shapes,
        "inductor_cache_dir": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
    }


def _pin_mxnet(deterministic: bool) -> dict[str, Any]:
    # MXNet 1.9.1 has no TF32 mode; determinism is set through the environment.
    return {}


_PIN = {
    "jax": _pin_jax,
    "tensorflow": _pin_tensorflow,
    "torch": _pin_torch,
    "mxnet": _pin_mxnet,
}
