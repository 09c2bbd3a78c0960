"""``workers.profiling`` against each framework's own profiler, in process.

Per framework: a block of matrix products must show most of its time inside
kernels, its top operator named as the framework names a matrix product and
run once per product per block; a block that mostly sleeps in Python around
one tiny operator must show a small kernel share, so the measure tells
framework time from kernel time.  A framework that is not importable here is
skipped: the main suite has no MXNet, which is tested with the MXNet
environment's interpreter, where the other three are skipped::

    .nox/mxnet-env/bin/python -m pytest tests/paths/test_profiling.py \
        -p no:cacheprovider --noconftest

(``--noconftest``: this folder's conftest needs Keras and its backends.)
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from workers.profiling import PROFILERS, _attribute, _Span, profile

BLOCKS = 3
PRODUCTS = 4  # matrix products per block
SIZE = 256

# How each framework names the kernel of a float32 matrix product on CPU;
# XLA:CPU runs it as a YNNPACK fusion.
MATMUL = {
    "torch": {"aten::mm"},
    "jax": {"ynn_fusion", "dot", "dot_general"},
    "tensorflow": {"_MklMatMul", "MatMul"},
    "mxnet": {"dot"},
}

Block = Callable[[], object]


def _framework(name: str) -> ModuleType:
    with warnings.catch_warnings():
        # MXNet 1.9 reads NumPy aliases deprecated since NumPy 1.20 on import.
        warnings.simplefilter("ignore", DeprecationWarning)
        return pytest.importorskip(name)


def _torch_blocks(torch: Any) -> tuple[Block, Block]:
    a, b, tiny = torch.randn(SIZE, SIZE), torch.randn(SIZE, SIZE), torch.ones(3)

    def products() -> object:
        c = a
        for _ in range(PRODUCTS):
            c = c @ b
        return c.numpy()

    def sleepy() -> object:
        time.sleep(0.01)
        return (tiny + 1).numpy()

    return products, sleepy


def _jax_blocks(jax: Any) -> tuple[Block, Block]:
    jnp = jax.numpy
    a, b, tiny = jnp.ones((SIZE, SIZE)), jnp.ones((SIZE, SIZE)), jnp.ones(3)
    product = jax.jit(lambda x, y: x @ y)

    def products() -> object:
        c = a
        for _ in range(PRODUCTS):
            c = product(c, b)
        return c.block_until_ready()

    def sleepy() -> object:
        time.sleep(0.01)
        return (tiny + 1).block_until_ready()

    return products, sleepy


def _tensorflow_blocks(tf: Any) -> tuple[Block, Block]:
    a, b = tf.random.normal((SIZE, SIZE)), tf.random.normal((SIZE, SIZE))
    tiny = tf.ones(3)

    @tf.function  # the graph's ops must be seen, not only eager ones
    def chain(x: Any, y: Any) -> Any:
        for _ in range(PRODUCTS):
            x = tf.matmul(x, y)
        return x

    def products() -> object:
        return chain(a, b).numpy()

    def sleepy() -> object:
        time.sleep(0.01)
        return (tiny + 1).numpy()

    return products, sleepy


def _mxnet_blocks(mx: Any) -> tuple[Block, Block]:
    a = mx.nd.random.normal(shape=(SIZE, SIZE))
    b = mx.nd.random.normal(shape=(SIZE, SIZE))
    tiny = mx.nd.ones((3,))

    def products() -> object:
        c = a
        for _ in range(PRODUCTS):
            c = mx.nd.dot(c, b)
        return mx.nd.waitall()

    def sleepy() -> object:
        time.sleep(0.01)
        return (tiny + 1).asnumpy()

    return products, sleepy


BLOCK_MAKERS = {
    "torch": _torch_blocks,
    "jax": _jax_blocks,
    "tensorflow": _tensorflow_blocks,
    "mxnet": _mxnet_blocks,
}


@pytest.fixture(params=PROFILERS)
def blocks(request: pytest.FixtureRequest) -> tuple[str, Block, Block]:
    framework: str = request.param
    products, sleepy = BLOCK_MAKERS[framework](_framework(framework))
    return framework, products, sleepy


def test_matrix_products_are_mostly_kernel_time(
    blocks: tuple[str, Block, Block],
) -> None:
    framework, products, _ = blocks
    result = profile(framework, products, BLOCKS)
    assert 0 < result.kernel_s <= result.wall_s, result
    assert result.kernel_s == pytest.approx(sum(op.seconds for op in result.ops))
    top = result.ops[0]
    assert top.name in MATMUL[framework], result
    assert top.calls == PRODUCTS * BLOCKS, result
    assert [op.seconds for op in result.ops] == sorted(
        (op.seconds for op in result.ops), reverse=True
    )


def test_a_block_that_sleeps_in_python_is_mostly_outside_kernels(
    blocks: tuple[str, Block, Block],
) -> None:
    framework, _, sleepy = blocks
    result = profile(framework, sleepy, BLOCKS)
    assert result.wall_s >= BLOCKS * 0.01
    assert result.kernel_s / result.wall_s < 0.2, result
    assert result.ops, result  # the tiny operator is still seen


def test_unknown_framework_and_no_blocks_are_refused() -> None:
    def never() -> None:
        raise AssertionError("block must not run")

    with pytest.raises(ValueError, match="known ones are torch, jax"):
        profile("caffe", never, BLOCKS)
    with pytest.raises(ValueError, match="at least 1"):
        profile("torch", never, 0)


def test_nested_kernels_own_their_time_and_concurrent_ones_share_it() -> None:
    # Thread 0: an outer span around an inner one; thread 1 overlaps both.
    spans = [
        _Span("outer", 0, 100, thread=0),
        _Span("inner", 20, 50, thread=0),
        _Span("other", 40, 80, thread=1),
        _Span("instant", 60, 60, thread=1),
    ]
    seconds, concurrent_s = _attribute(spans)
    assert seconds == pytest.approx({"outer": 55e-9, "inner": 25e-9, "other": 20e-9})
    assert sum(seconds.values()) == pytest.approx(100e-9)
    assert concurrent_s == pytest.approx(40e-9)
