"""The registry of layer kinds: every fact the framework-free side knows of a
kind lives in that kind's module here (``zoo.kinds.base.Kind``: its options,
output shape, parameters, FLOPs, Keras layer, Keras reading, table
words, ``harness fuzz`` draw and typical hand-written mistakes), and every
other place reads it from
``KINDS``.

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

from zoo.kinds.base import Kind, Mistake

# Modules of this package that hold no kind: the shared records and rules.
_SHARED = ("base", "keras_words", "recurrent")


def discovered(
    path: list[str], package: str, shared: tuple[str, ...] = _SHARED
) -> dict[Kind, str]:
    """Every kind of every module of ``package`` (found on ``path``) but the
    ``shared`` ones, with the file that holds it, by module name and, within
    a module, in its own order: a new module is registered by being there."""
    found: dict[Kind, str] = {}
    folder = package.replace(".", "/")
    for module in sorted(m.name for m in pkgutil.iter_modules(path)):
        if module in shared:
            continue
        loaded = importlib.import_module(f"{package}.{module}")
        made = getattr(loaded, "KINDS", None) or (getattr(loaded, "KIND", None),)
        kinds = [kind for kind in made if isinstance(kind, Kind)]
        if not kinds or len(kinds) != len(made):
            raise ImportError(
                f"{folder}/{module}.py makes no kind: give it a KIND = Kind(...) "
                "(or KINDS, a tuple of them), or name it in zoo/kinds/__init__.py's "
                "_SHARED if it holds rules several kinds share"
            )
        found.update(dict.fromkeys(kinds, f"{folder}/{module}.py"))
    return found


_FOUND = discovered(list(__path__), __name__)
_ORDER = tuple(_FOUND)
# Kind -> the file that holds it, for messages that say which file to open.
MODULE_FILES: dict[str, str] = {kind.name: file for kind, file in _FOUND.items()}
KINDS: dict[str, Kind] = {kind.name: kind for kind in _ORDER}
_NAMES = [kind.name for kind in _ORDER]
if len(KINDS) != len(_NAMES):
    raise ImportError(
        "two kinds of zoo/kinds have the same name: "
        + ", ".join(sorted({n for n in _NAMES if _NAMES.count(n) > 1}))
    )
# Every kind's mistakes (``Kind.mistakes``) by name, in the registry's order;
# one that several kinds declare (the merges' ``join-reversed``) once.
MISTAKES: dict[str, Mistake] = {m.name: m for kind in _ORDER for m in kind.mistakes}
# Keras class -> the kind that reads it.
BY_KERAS_CLASS: dict[str, Kind] = {
    cls: kind for kind in _ORDER for cls in kind.keras_classes
}
