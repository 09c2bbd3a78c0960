"""The reference models: framework-free specs here, Keras builders in
``zoo.keras_models`` (imported only inside a Keras worker)."""

from zoo.models import get_spec
from zoo.specs import MODELS, VARIANTS, ModelSpec

__all__ = ["MODELS", "VARIANTS", "ModelSpec", "get_spec"]
