"""The four reference models from low-level TensorFlow operators (no Keras)."""
