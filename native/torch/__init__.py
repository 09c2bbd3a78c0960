"""The four reference models from low-level PyTorch operators (no ``nn.Module``)."""
