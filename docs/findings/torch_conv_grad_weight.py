"""PyTorch's CPU convolution cannot take the gradient of a one-output-channel
weight laid out channels-last, as Keras 3 lays out every kernel: the
measurement behind pytorch-conv-grad-weight.md (finding 11b1318ed9).

Run as ``python docs/findings/torch_conv_grad_weight.py`` (PyTorch alone,
no Keras, no project code).  The weight is a ``(1, 4, 3, 3)`` view of a
``(3, 3, 4, 1)`` tensor (kernel height, width, input channels, output
channels: Keras' layout) and the input a ``(1, 4, 6, 5)`` view of a
``(1, 6, 5, 4)`` one (channels last); both are channels-last contiguous to
PyTorch (``is_contiguous(memory_format=torch.channels_last)``).  The
gradient of ``conv2d(x, w).sum()`` with respect to ``w`` is expected to be
the one of the same values made contiguous; PyTorch raises instead.  Each
variant changes one thing; the last is a transposed convolution with one
input channel (its weight's first axis), as Keras' ``Conv2DTranspose`` lays
it out.  One JSON object: the versions, and per variant
whether ``backward`` raised (its message) or the largest difference from
the float64 gradient of the contiguous copies.
"""

from __future__ import annotations

import json
import platform

import torch


def conv_gradient(
    *,
    filters: int = 1,
    channels: int = 4,
    kernel: int = 3,
    weight_layout: str = "keras",
    channels_last_input: bool = True,
    dtype: torch.dtype = torch.float32,
    transposed: bool = False,
) -> dict[str, object]:
    """The weight's gradient of one convolution, or the error it raised."""
    generator = torch.Generator().manual_seed(0)
    # Keras' kernel: (kh, kw, channels, filters), or (kh, kw, filters, channels)
    # for a transposed convolution; PyTorch's weight is (filters, channels, kh,
    # kw), or (channels, filters, kh, kw): the same permutation of either.
    shape = (filters, channels) if transposed else (channels, filters)
    kernel_keras = torch.randn(kernel, kernel, *shape, generator=generator)
    image_nhwc = torch.randn(1, 6, 5, channels, generator=generator)
    weight = kernel_keras.permute(3, 2, 0, 1).to(dtype)  # a view
    image = image_nhwc.permute(0, 3, 1, 2).to(dtype)  # (N, C, H, W), a view
    if weight_layout == "contiguous":
        weight = weight.contiguous()
    elif weight_layout == "channels_last":  # the canonical strides, (36, 1, 12, 4)
        weight = weight.contiguous().contiguous(memory_format=torch.channels_last)
    if not channels_last_input:
        image = image.contiguous()
    weight = weight.detach().requires_grad_()
    functional = torch.nn.functional
    convolve = functional.conv_transpose2d if transposed else functional.conv2d
    said: dict[str, object] = {
        "weight_strides": list(weight.stride()),
        "weight_channels_last": weight.is_contiguous(memory_format=torch.channels_last),
    }
    try:
        (got,) = torch.autograd.grad(convolve(image, weight).sum(), weight)
    except RuntimeError as exc:
        said["raised"] = str(exc).splitlines()[0]
        return said
    expected_weight = weight.detach().double().contiguous().requires_grad_()
    loss = torch.nn.functional.conv2d(
        image.double().contiguous(), expected_weight
    ).sum()
    (expected,) = torch.autograd.grad(loss, expected_weight)
    said["largest_difference"] = float((got.double() - expected).abs().max())
    return said


VARIANTS = {
    "as Keras lays it out": {},
    "weight made contiguous": {"weight_layout": "contiguous"},
    "weight made channels-last by PyTorch": {"weight_layout": "channels_last"},
    "input made contiguous": {"channels_last_input": False},
    "two output channels": {"filters": 2},
    "one input channel": {"channels": 1},
    "a 1x1 kernel": {"kernel": 1},
    "float64": {"dtype": torch.float64},
    "transposed, one input channel": {
        "transposed": True,
        "channels": 1,
        "filters": 2,
    },
}


def main() -> None:
    print(
        json.dumps(
            {
                "torch": torch.__version__,
                "python": platform.python_version(),
                "machine": platform.machine(),
                "variants": {
                    name: conv_gradient(**options) for name, options in VARIANTS.items()
                },  # type: ignore[arg-type]
            }
        )
    )


if __name__ == "__main__":
    main()
