"""What a test session sent to real workers, held against the registries.

The session points ``HARNESS_REQUEST_LOG`` at a file (``tests/conftest.py``)
and every worker appends a line for each request it serves
(``workers.serve.log_request``), those of the commands a test runs as a
subprocess included: the paths that served it, the model's family
(``ModelSpec.module``), layer kinds and layer options, the deliberate fault
it carried, its task.  ``tests/paths/test_touched.py`` runs last and fails,
naming each one, when the session left a path, a mode, a model family, a
layer kind or option, a fault in a native path or a worker task untouched:
moving a check to the full tier (``tests/tiers.py``) can never silently drop
one.

Only a path's own workers count: the float64 (and float32 baseline) runs of
the reference implementations are the judge, not a path under test.
Framework-free.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from equivalence.sensitivity import fault_stage
from native.faults import FAULTS, TIMED_FAULTS
from workers import messages
from workers.paths import LEVEL_PATHS, MODE_PATHS, MODES, PATHS, get_path
from zoo import user_models
from zoo.models import get_spec
from zoo.specs import LAYER_OPTIONS, MODELS, VARIANTS, ModelSpec

REFERENCE_ENV = "HARNESS_NATIVE_DTYPE"
TESTS = Path(__file__).resolve().parent


@dataclass
class Table:
    """What was touched, by kind; each a set of names."""

    paths: set[str] = field(default_factory=set)
    modes: set[str] = field(default_factory=set)
    families: set[str] = field(default_factory=set)
    kinds: set[str] = field(default_factory=set)
    options: set[str] = field(default_factory=set)
    faults: set[str] = field(default_factory=set)
    tasks: set[str] = field(default_factory=set)

    def note(self, paths: Iterable[str], request: Mapping[str, Any]) -> None:
        """One request (a line of the log: ``task``, ``model``, ``fault``)
        served by ``paths``."""
        for path in paths:
            info = get_path(path)
            self.paths.add(path)
            self.modes.add(_mode(info.api, info.framework, info.mode))
            fault = request.get("fault")
            if fault is not None:
                self.faults.update(_fault(fault, path))
        self.tasks.add(request["task"])
        model = request.get("model")
        if isinstance(model, str):
            try:
                spec = get_spec(model)
            except ValueError:  # a user's model in the worker's store, or a
                # test of an unknown model's refusal
                store = request.get("store")
                found = user_models.find(model, Path(store)) if store else None
                if found is None:
                    return
                spec = found
            self.families.add(spec.module)
            self.kinds.update(layer.kind for layer in spec.layers)
            self.options.update(options(spec))


# Options that are a size, not a setting: every layer of the kind has one.
SIZES = (
    "units",
    "filters",
    "kernel_size",
    "pool_size",
    "key_dim",
    "num_heads",
    "input_dim",
    "output_dim",
)


def option_default(options: object, option: str) -> object:
    """The default of ``option`` in an options record."""
    return next(f.default for f in dataclasses.fields(options) if f.name == option)  # type: ignore[arg-type]


def options(spec: ModelSpec) -> set[str]:
    """The layer options ``spec`` sets, as ``<kind> <option>=<value>``: a
    setting is touched once a request ran some layer of its kind with it
    (``strides=2`` on a conv2d, ``activation='tanh'``, sequences...)."""
    found = set()
    for layer in spec.layers:
        for option in LAYER_OPTIONS[layer.kind]:
            value = getattr(layer.options, option)
            if option in SIZES:
                continue  # a size, not a setting
            if option == "strides":  # Keras' default step, or another
                default = option_default(layer.options, option)
                value = "default" if value == default else "set"
            found.add(f"{layer.kind} {option}={value!r}")
        if layer.kind_record.regularized:
            found.add(f"{layer.kind} regularize={layer.regularize!r}")
    return found


def _fault(fault: str, path: str) -> set[str]:
    """A fault of the suite counts once, in whichever native path, and as a
    fault at its stage in ``path``: each fault must be caught, and every
    native path must localize a fault at every stage the faults point at
    (the fast tier's pairs, ``tests.tiers.fault_pairs``); a timed closure's
    fault once, in whichever path."""
    if fault in TIMED_FAULTS:
        return {f"{fault} in a timed closure"}
    if fault not in FAULTS:  # a test of an unknown fault's refusal
        return set()
    return {fault, f"a {fault_stage(fault)} fault in {path}"}


def _mode(api: str, framework: str, mode: str) -> str:
    return f"{api}-{framework} in {mode}"


def registry() -> Table:
    """Everything a session should touch, from the registries themselves."""
    native = [p for p, info in PATHS.items() if info.api == "native"]
    every_task = {
        task.TASK
        for task in vars(messages).values()
        if isinstance(task, type)
        and issubclass(task, messages.Task)
        and "TASK" in vars(task)
    }
    return Table(
        paths={*PATHS, *MODE_PATHS, *LEVEL_PATHS},
        modes={
            _mode(api, framework, mode)
            for (api, framework), modes in MODES.items()
            for mode in modes
        },
        families={spec.module for spec in MODELS.values()},
        kinds={
            layer.kind
            for s in (*MODELS.values(), *VARIANTS.values())
            for layer in s.layers
        },
        options={o for s in (*MODELS.values(), *VARIANTS.values()) for o in options(s)},
        faults={n for f in FAULTS for p in native for n in _fault(f, p)}
        | {n for f in TIMED_FAULTS for n in _fault(f, "")},
        tasks=every_task,
    )


def missing(
    touched: Table, excused: Callable[[str], str | None]
) -> dict[str, list[str]]:
    """What the registry holds and ``touched`` does not, by kind; an entry
    ``excused`` gives a reason for (a path whose framework is not installed)
    is left out."""
    expected = registry()
    gaps = {}
    for kind in (f.name for f in dataclasses.fields(Table)):
        absent = sorted(getattr(expected, kind) - getattr(touched, kind))
        absent = [name for name in absent if excused(name) is None]
        if absent:
            gaps[kind] = absent
    return gaps


def _unavailable_file(log: Path) -> Path:
    return log.with_name(log.name + ".unavailable")


def note_unavailable(log: Path, path: str, reason: str) -> None:
    """Say beside ``log`` that ``path`` could not start in this session (an
    optional framework not installed), for a process that holds the table but
    started no checker of its own (pytest-xdist's controller)."""
    line = json.dumps({"path": path, "reason": reason}) + "\n"
    with _unavailable_file(log).open("a") as out:
        out.write(line)


def read_unavailable(log: Path) -> dict[str, str]:
    """The paths noted unavailable beside ``log``, with their reasons."""
    noted = _unavailable_file(log)
    if not noted.exists():
        return {}
    lines = [json.loads(line) for line in noted.read_text().splitlines()]
    return {line["path"]: line["reason"] for line in lines}


def read(log: Path) -> Table:
    """The table of a request log (an absent log: nothing touched)."""
    table = Table()
    if not log.exists():
        return table
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        if not entry["reference"]:
            table.note(entry["paths"], entry)
    return table


def whole_suite(config: Any, ran: list[Path] | None) -> str | None:
    """Why a pytest session (its ``config``) is not the whole suite, or None
    when it is: every test module among ``ran`` (the session's items;
    ``None`` where the process collected none, pytest-xdist's controller,
    which then goes by the arguments it was given), and no -k or -m."""
    if config.getoption("keyword") or config.getoption("markexpr"):
        return "tests were chosen with -k or -m"
    if config.getoption("lf", None) or config.getoption("deselect", None):
        return "tests were chosen with --lf or --deselect"
    if ran is None:
        chosen = [Path(str(arg).split("::")[0]).resolve() for arg in config.args]
        if all(arg == TESTS or arg in TESTS.parents for arg in chosen):
            return None
        return f"tests were chosen by path ({' '.join(map(str, config.args))})"
    every = {p.resolve() for p in TESTS.rglob("test_*.py")}
    left_out = sorted(str(p.relative_to(TESTS)) for p in every - set(ran))
    if left_out:
        return f"{len(left_out)} test modules not run (e.g. {left_out[0]})"
    return None
