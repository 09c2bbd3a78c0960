"""The four reference models from low-level JAX operators (no Flax, no Optax)."""
