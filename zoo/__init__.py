"""The reference models: framework-free specs here, Keras builders in
``zoo.keras_models`` (imported only inside a Keras worker)."""

from zoo.specs import MODELS, VARIANTS, ModelSpec, get_spec

__all__ = ["MODELS", "VARIANTS", "ModelSpec", "get_spec"]
