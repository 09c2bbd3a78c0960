"""PyTorch's ``binary_cross_entropy_with_logits`` (what Keras on PyTorch
computes a binary cross-entropy from logits with) rounds ``1 + exp(z)``
before its log for a logit ``z`` below 0 and a target of 0: 3e-3 off at
z = -9 in float32, where ``softplus`` is exact.  Run with ``torch`` or
``mxnet`` as its argument (MXNet's ``softrelu`` does the same); it prints
each value's relative error against float64 ``log1p(exp(z))``."""

import sys

import numpy as np

z = np.array([-9.0, -7.0, -5.0, -3.0, 3.0], np.float32)
exact = np.log1p(np.exp(z.astype(np.float64)))


def error(values):
    return (np.abs(np.asarray(values, np.float64) - exact) / exact).tolist()


if sys.argv[1:] == ["mxnet"]:
    import mxnet as mx

    print(
        "softrelu:",
        error(mx.nd.Activation(mx.nd.array(z), act_type="softrelu").asnumpy()),
    )
else:
    import torch
    import torch.nn.functional as F

    t = torch.from_numpy(z)
    loss = F.binary_cross_entropy_with_logits(t, torch.zeros(5), reduction="none")
    print("binary_cross_entropy_with_logits:", error(loss.numpy()))
    print("softplus:", error(F.softplus(t).numpy()))
