"""PyTorch's nll_loss cannot take the backward pass of a channels-last
image of log-probabilities on CPU: `grad_input must be contiguous`.

Keras 3.15 on PyTorch reaches it in every per-pixel sparse categorical
cross-entropy computed from probabilities (`from_logits=False`, Keras'
default): `keras/src/backend/torch/nn.py` moves the class axis of an
`(N, H, W, C)` output to axis 1 with `movedim` (a view, channels last), and
`nll_loss` of that view trains no model: keras.io's U-Net segmentation
(examples/gallery.py `unet_segmentation`) fails in `train_on_batch`.  From
logits (`cross_entropy`) it does not.  Plain PyTorch, no project code.

    python docs/findings/nll_loss_channels_last.py

prints one line: whether the backward raised, and whether the same values
made contiguous train (tests/test_findings_scripts.py runs it).
"""

import json

import torch
import torch.nn.functional as F


def main() -> None:
    torch.manual_seed(0)
    x = torch.rand(2, 4, 4, 3, requires_grad=True)  # an image output, channels last
    target = torch.randint(0, 3, (2, 4, 4))
    probabilities = x.movedim(3, 1)  # (N, C, H, W), as Keras moves it
    log_p = torch.log(probabilities / probabilities.sum(1, keepdim=True))
    raised = ""
    try:
        F.nll_loss(log_p, target).backward()
    except RuntimeError as exc:
        raised = str(exc)
    x.grad = None
    contiguous = torch.log(probabilities / probabilities.sum(1, keepdim=True))
    F.nll_loss(contiguous.contiguous(), target).backward()
    print(
        json.dumps(
            {
                "torch": torch.__version__,
                "channels_last_input": log_p.is_contiguous(
                    memory_format=torch.channels_last
                ),
                "raised": raised,
                "contiguous_trains": x.grad is not None,
            }
        )
    )


if __name__ == "__main__":
    main()
