"""One float32 matmul peak, timed in a process of its own:
``python -m workers.peak_probe SOURCE SECONDS [--size N] [--repeats N]
[--cpus 0,1]`` prints one JSON object on stdout.

``SOURCE`` is ``numpy`` (``np.matmul`` through NumPy's BLAS) or a framework
timing its own float32 matmul: ``jax`` (a jitted ``jnp.matmul``, waited for
with ``block_until_ready``), ``tensorflow`` (``tf.linalg.matmul`` in a
``tf.function``, read back with ``.numpy()``), ``torch`` (``torch.matmul`` on
the CPU) or ``mxnet`` (``mx.nd.dot``, then ``mx.nd.waitall()``).  The
orchestrator (``harness.core.peak``) runs a framework's probe with that
framework's interpreter and the thread settings its workers get; this module
pins the same numeric settings a worker does (``workers.numerics``) and, like
``workers.serve``, starts on the worker's CPUs (``--cpus``) and frees its
helper threads once the framework is loaded.

The answer: ``{"status": "ok", "flops_per_s": best, "median_flops_per_s",
"rates", "kernel", ...}``, or ``{"status": "unavailable", "error": ...}`` when
the framework cannot be imported here (exit status 0 either way; 2 for
arguments it cannot read).  ``kernel`` names what ran, e.g. ``openblas 0.3.29
SkylakeX`` from ``threadpoolctl`` for NumPy.

Imports nothing at the top but the standard library, so that ``--cpus`` pins
the process before NumPy's BLAS starts its threads; NumPy 1.23-safe (the MXNet
environment), and ``threadpoolctl`` is optional (that environment lacks it).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

SOURCES = ("numpy", "jax", "tensorflow", "torch", "mxnet")
SIZE = 2048
REPEATS = 5
# The ranges a probe takes: three float32 matrices of MAX_SIZE squared are
# 768 MiB (a larger one may not fit the machine, and says nothing more of
# its peak); repeats and seconds bound how long one probe may run.
MAX_SIZE = 8192
MAX_REPEATS = 1000
MAX_SECONDS = 3600.0
# What the answer reports of the environment the product ran under: thread
# counts, and the OpenBLAS variables that choose its kernel and cache sizes.
REPORTED_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "HARNESS_INTRA_OP_THREADS",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
)

Product = Callable[[], None]


def time_products(product: Product, repeats: int, seconds: float) -> list[float]:
    """Products per second in each of ``repeats`` repeats, each running
    ``product`` back to back until at least ``seconds`` have passed, after one
    untimed product (thread pools, page faults, a JIT compile)."""
    product()
    rates = []
    for _ in range(repeats):
        products = 0
        start = time.perf_counter()
        while True:
            product()
            products += 1
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                break
        rates.append(products / elapsed)
    return rates


def blas_libraries() -> list[dict[str, Any]]:
    """The BLAS libraries this process has loaded, as ``threadpoolctl`` sees
    them (``internal_api``, ``version``, ``architecture``, ``num_threads``);
    empty where threadpoolctl is not installed."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    keys = ("internal_api", "version", "architecture", "num_threads")
    return [
        {key: info.get(key) for key in keys}
        for info in threadpool_info()
        if info.get("user_api") == "blas"
    ]


def blas_kernel(libraries: Sequence[dict[str, Any]]) -> str | None:
    """``openblas 0.3.29 SkylakeX``: the first BLAS library's name, version
    and the kernel family it chose (OpenBLAS' ``architecture``); None for no
    library."""
    for library in libraries:
        parts = [library.get(k) for k in ("internal_api", "version", "architecture")]
        named = " ".join(str(p) for p in parts if p)
        if named:
            return named
    return None


def _random(shape: tuple[int, int], seed: int) -> Any:
    import numpy as np

    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def _numpy(size: int) -> tuple[Product, dict[str, Any]]:
    import numpy as np

    a, b = _random((size, size), 0), _random((size, size), 1)
    c = np.empty((size, size), dtype=np.float32)

    def product() -> None:
        np.matmul(a, b, out=c)  # into ``c``: no allocation in the timed loop

    return product, {"version": np.__version__}


def _jax(size: int) -> tuple[Product, dict[str, Any]]:
    from importlib.metadata import version

    import jax
    import jax.numpy as jnp

    a = jnp.asarray(_random((size, size), 0))
    b = jnp.asarray(_random((size, size), 1))
    matmul = jax.jit(jnp.matmul)

    def product() -> None:
        matmul(a, b).block_until_ready()

    device = jax.devices()[0]
    return product, {
        "version": jax.__version__,
        "kernel": f"xla {device.platform} (jaxlib {version('jaxlib')})",
    }


def _tensorflow(size: int) -> tuple[Product, dict[str, Any]]:
    import tensorflow as tf

    a = tf.constant(_random((size, size), 0))
    b = tf.constant(_random((size, size), 1))
    matmul = tf.function(tf.linalg.matmul)

    def product() -> None:
        matmul(a, b).numpy()  # read back: the product is done

    onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1") != "0"
    try:
        from tensorflow.python.util import _pywrap_util_port

        onednn = onednn and bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):
        pass  # a TensorFlow without the flag: the environment's word stands
    return product, {
        "version": tf.__version__,
        "kernel": f"tensorflow {tf.__version__}" + (" onednn" if onednn else ""),
    }


def _torch(size: int) -> tuple[Product, dict[str, Any]]:
    import torch

    a = torch.from_numpy(_random((size, size), 0))
    b = torch.from_numpy(_random((size, size), 1))
    c = torch.empty((size, size), dtype=torch.float32)

    def product() -> None:
        torch.matmul(a, b, out=c)  # synchronous on the CPU

    blas = "mkl" if torch.backends.mkl.is_available() else "blas"
    capability = torch.backends.cpu.get_cpu_capability()
    return product, {
        "version": torch.__version__,
        "kernel": f"torch {torch.__version__} {blas} {capability}",
    }


def _mxnet(size: int) -> tuple[Product, dict[str, Any]]:
    import mxnet as mx

    a = mx.nd.array(_random((size, size), 0), dtype="float32")
    b = mx.nd.array(_random((size, size), 1), dtype="float32")
    c = mx.nd.empty((size, size), dtype="float32")

    def product() -> None:
        mx.nd.dot(a, b, out=c)
        mx.nd.waitall()  # MXNet's engine runs asynchronously

    features = mx.runtime.Features()
    enabled = [
        name.lower()
        for name in ("BLAS_OPEN", "BLAS_MKL", "BLAS_ATLAS", "BLAS_APPLE", "MKLDNN")
        if features.is_enabled(name)
    ]
    return product, {
        "version": mx.__version__,
        "kernel": " ".join([f"mxnet {mx.__version__}", *enabled]),
    }


_SETUPS: dict[str, Callable[[int], tuple[Product, dict[str, Any]]]] = {
    "numpy": _numpy,
    "jax": _jax,
    "tensorflow": _tensorflow,
    "torch": _torch,
    "mxnet": _mxnet,
}


def probe(
    source: str, seconds: float, size: int = SIZE, repeats: int = REPEATS
) -> dict[str, Any]:
    """Time ``source``'s float32 ``size`` x ``size`` matmul in this process;
    the answer (JSON-ready).  A framework that cannot be imported is
    ``unavailable`` with the import's error."""
    if source not in _SETUPS:
        raise ValueError(f"unknown source {source!r}; known: {', '.join(SOURCES)}")
    if not (
        1 <= size <= MAX_SIZE
        and 1 <= repeats <= MAX_REPEATS
        and 0 < seconds <= MAX_SECONDS
    ):
        raise ValueError(
            f"a matmul probe needs size from 1 to {MAX_SIZE}, repeats from 1 to "
            f"{MAX_REPEATS} and seconds above 0 and at most {MAX_SECONDS:g}, not "
            f"size={size}, repeats={repeats}, seconds={seconds}"
        )
    pinned: dict[str, Any] = {}
    try:
        if source != "numpy":
            from workers import numerics

            pinned = numerics.pin_environment(source, False)
        product, facts = _SETUPS[source](size)
        if source != "numpy":
            from workers import launch

            pinned.update(numerics.pin_framework(source, False))
            # Every pool is sized for the worker's CPUs by now, as in
            # workers.serve; helper threads may use the others from here.
            launch.release_helpers()
    except ImportError as exc:
        return {"status": "unavailable", "source": source, "error": str(exc)}
    rates = [rate * 2 * size**3 for rate in time_products(product, repeats, seconds)]
    libraries = blas_libraries()
    return {
        "status": "ok",
        "source": source,
        "flops_per_s": max(rates),
        "median_flops_per_s": statistics.median(rates),
        "rates": rates,
        "size": size,
        "repeats": repeats,
        "seconds": seconds,
        **facts,
        "kernel": facts.get("kernel") or blas_kernel(libraries) or "unknown",
        "blas": libraries,
        "numerics": pinned,
        "environment": {name: os.environ.get(name) for name in REPORTED_VARIABLES},
        "cpus": sorted(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else None,
    }


def _ranged(kind: type[int] | type[float], low: float, high: float) -> Any:
    """An argparse ``type`` reading a ``kind`` from ``low`` to ``high`` (a
    float above ``low``), whose refusal says the range."""
    import argparse

    exact = kind is int
    span = f"an integer from {low:g}" if exact else f"a number above {low:g} up"

    def fits(value: float) -> bool:  # NaN fits no range
        return (low <= value if exact else low < value) and value <= high

    def read(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not fits(value):
            raise argparse.ArgumentTypeError(
                f"takes {span} to {high:g}, not {text[:40]!r}"
            )
        return value

    return read


def _write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to the descriptor ``fd``."""
    while data:
        data = data[os.write(fd, data) :]


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m workers.peak_probe",
        description="Time one float32 matmul peak; one JSON object on stdout.",
    )
    parser.add_argument("source", choices=SOURCES)
    parser.add_argument(
        "seconds",
        type=_ranged(float, 0, MAX_SECONDS),
        help=f"seconds per timed repeat (above 0, at most {MAX_SECONDS:g})",
    )
    parser.add_argument(
        "--size",
        type=_ranged(int, 1, MAX_SIZE),
        default=SIZE,
        help=f"the matrices' side, from 1 to {MAX_SIZE} (default {SIZE})",
    )
    parser.add_argument(
        "--repeats",
        type=_ranged(int, 1, MAX_REPEATS),
        default=REPEATS,
        help=f"timed repeats, from 1 to {MAX_REPEATS} (default {REPEATS})",
    )
    parser.add_argument("--cpus", help="start on these CPUs, e.g. 1 or 0,1")
    args = parser.parse_args(argv)
    if args.cpus:
        # Before NumPy or a framework starts a thread, so that every one
        # inherits it (a worker is pinned before its interpreter starts).
        try:
            os.sched_setaffinity(0, [int(c) for c in args.cpus.split(",")])
        except (OSError, ValueError, AttributeError) as exc:
            parser.error(f"cannot start on CPUs {args.cpus}: {exc}")
    # Keep the real stdout for the answer; library prints go to stderr.
    channel = os.dup(1)
    os.dup2(2, 1)
    try:
        answer = probe(args.source, args.seconds, args.size, args.repeats)
    except ValueError as exc:
        parser.error(str(exc))
    _write_all(channel, (json.dumps(answer) + "\n").encode())
    os.close(channel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
