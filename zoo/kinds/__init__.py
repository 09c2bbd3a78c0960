"""The registry of layer kinds: every fact the framework-free side knows of a
kind lives in that kind's module here (``zoo.kinds.base.Kind``: its options,
output shape, parameters, FLOPs, Keras layer, Keras reading and table
words), and every other place reads it from ``KINDS``.

A module makes one ``KIND``, or a few closely related ones in ``KINDS``
(the four window pools, the merges): kinds that differ by one word share
their module rather than copy it.  A module is registered by being in this
package: nothing lists the modules.  The framework side is one ``ops.py`` per
framework, with a block per kind named as the kind (``native.protocol``);
``tests/test_kinds.py`` checks that every kind has every facet and a block
in every framework.  docs/extending.md says what adding a kind takes.

Standard library only.
"""

from __future__ import annotations

import importlib
import pkgutil

from zoo.kinds.base import Kind

# Modules of this package that hold no kind: the shared records and rules.
_SHARED = ("base", "keras_words", "recurrent")


def _discovered() -> tuple[Kind, ...]:
    """Every kind of every module of this package, by module name and, within
    a module, in its own order: a new module is registered by being here."""
    found: list[Kind] = []
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        if module in _SHARED:
            continue
        loaded = importlib.import_module(f"{__name__}.{module}")
        kinds = getattr(loaded, "KINDS", None) or (getattr(loaded, "KIND", None),)
        if not all(isinstance(kind, Kind) for kind in kinds):
            raise ImportError(
                f"zoo/kinds/{module}.py makes no kind: give it a KIND = Kind(...) "
                "(or KINDS, a tuple of them), or name it in zoo/kinds/__init__.py's "
                "_SHARED if it holds rules several kinds share"
            )
        found.extend(kinds)
    return tuple(found)


_ORDER = _discovered()
KINDS: dict[str, Kind] = {kind.name: kind for kind in _ORDER}
_NAMES = [kind.name for kind in _ORDER]
if len(KINDS) != len(_NAMES):
    raise ImportError(
        "two kinds of zoo/kinds have the same name: "
        + ", ".join(sorted({n for n in _NAMES if _NAMES.count(n) > 1}))
    )
# Keras class -> the kind that reads it.
BY_KERAS_CLASS: dict[str, Kind] = {
    cls: kind for kind in _ORDER for cls in kind.keras_classes
}
