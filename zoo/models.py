"""Every model by its name: a built-in one (``zoo.specs``: the reference
models and their variants) or a user's model in the store
(``zoo.user_models``).  Above both, so that neither imports the other back.
"""

from __future__ import annotations

from zoo import user_models
from zoo.specs import MODELS, VARIANTS, ModelSpec


def get_spec(name: str) -> ModelSpec:
    """The spec for ``name``: a built-in model, or a user's model in the
    store (``zoo.user_models``); else a ValueError listing the known names."""
    known = {**MODELS, **VARIANTS}
    if name in known:
        return known[name]
    found = user_models.find(name)
    if found is None:
        raise ValueError(
            f"unknown model {name!r}; known models: {', '.join(sorted(known))}, "
            f"or a user's model in {user_models.store()} (--model FILE)"
        )
    return found
