"""The gallery's table: which models the tool accepts, and how every path
fared on the accepted ones.

    python examples/gallery_table.py gallery-results [--markdown gallery.md]

Reads, for each ``<name>.keras`` in the folder, what ``nox -s gallery``
left beside it: ``<name>.json``, the verdicts ``python -m equivalence
--model <name>.keras --out <name>.json`` wrote (the model was accepted and
judged), else ``<name>.stderr``, that command's standard error, whose last
``error: `` line is the door's one sentence (it exited 2 and wrote no
verdicts).  Prints the table, and writes it as Markdown with ``--markdown``.

Every field read from a verdict file is checked first; a file that is not
what ``equivalence/__main__.py`` writes (schema ``SCHEMA_VERSIONS``) is
refused in one sentence naming the file and the field, shown in its row,
and makes the exit status 1.  A path passes when its verdict is ``pass``
(or ``unavailable``: its framework is not installed here, as the tool
counts it) and its multiple ``m`` is within the file's own rule; a ``pass``
whose ``m`` exceeds the rule is shown as failing.  The notes of schema 6
(what Keras is known to compute differently, by path) are listed; a noted
path that fails still fails the model.  Standard library and
tabulate only: no framework is imported, nor Keras (the examples' titles
come from ``gallery.EXAMPLES``, which needs none).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from tabulate import tabulate

from equivalence.keras_known import KNOWN_BUG
from zoo import files

HERE = Path(__file__).resolve().parent
# What equivalence/__main__.py writes (VERDICT_SCHEMA_VERSION) and this
# reads; tests/test_gallery.py checks the two agree.
SCHEMA_VERSIONS = (5, 6)
# From schema 6 on, each case holds ``notes``: what Keras is known to compute
# differently, by path.
NOTES_SINCE = 6
VERDICTS = ("pass", "unavailable", "infer-only", "unchecked", "fail", "error")
PASSING = ("pass", "unavailable")
# The largest verdict file and standard error file read (a verdict file is
# a few kB; a run's standard error a few MB at most).
MAX_VERDICT_BYTES = 64 << 20
MAX_STDERR_BYTES = 1 << 30
# The last this much of a standard error file is read.
STDERR_TAIL_BYTES = 1 << 20


class VerdictFileError(ValueError):
    """A verdict file that is not what ``python -m equivalence --out`` writes."""


@dataclass(frozen=True)
class PathResult:
    """One path's verdict on one model and the largest multiple it needed
    over the model's cases (``None``: not judged, as a path that errored)."""

    verdict: str
    m: float | None
    rule: float

    @property
    def passes(self) -> bool:
        within = self.m is None or self.m <= self.rule
        return self.verdict in PASSING and (self.verdict != "pass" or within)

    def cell(self) -> str:
        m = "" if self.m is None else f" {_multiple(self.m)}"
        if self.verdict == "pass" and not self.passes:
            return f"FAIL: says pass, m{m} > {self.rule:g}"
        return f"{self.verdict}{m}"


@dataclass
class Row:
    """One gallery file: accepted and judged, refused, unreadable or not run."""

    name: str
    status: str  # "accepted", "refused", "unreadable", "no verdicts", "not run"
    said: str = ""  # the door's sentence, or what is wrong or missing
    paths: dict[str, PathResult] = field(default_factory=dict)
    reference_sound: bool = True
    notes: dict[str, list[str]] = field(default_factory=dict)

    def known_bug(self, path: str) -> str:
        """What the tool's notes name ``path``'s failures as
        (``equivalence.keras_known``): ``Keras bug``, ``Keras by design``
        (a difference Keras makes on purpose), or ``""`` (not named)."""
        named = [n for n in self.notes.get(path, []) if n.startswith(KNOWN_BUG)]
        if not named:
            return ""
        by_design = all("(by design" in n for n in named)
        return "Keras by design" if by_design else "Keras bug"

    @property
    def all_pass(self) -> str:
        if self.status != "accepted":
            return "-"
        failing = [
            f"{p}: {_SAID[self.known_bug(p)]}" if self.known_bug(p) else p
            for p, r in self.paths.items()
            if not r.passes
        ]
        if failing:
            return f"no ({', '.join(failing)})"
        if not self.reference_sound:
            return "no (a reference implementation was found wrong)"
        unavailable = sum(r.verdict == "unavailable" for r in self.paths.values())
        return f"yes ({unavailable} unavailable)" if unavailable else "yes"


_SAID = {
    "Keras bug": "a known Keras bug",
    "Keras by design": "a Keras difference by design",
}


def _cell(row: Row, path: str) -> str:
    """A path's verdict and m, a failure the notes name as a Keras bug (or
    a difference Keras makes by design) marked so."""
    cell = row.paths[path].cell()
    named = row.known_bug(path)
    return f"{cell} ({named})" if named else cell


def _multiple(m: float) -> str:
    return "nan" if math.isnan(m) else f"{m:.3g}"


def _expect(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    """``value`` when it is a ``kind`` (a bool is no number), else a
    VerdictFileError naming the field ``where``."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise VerdictFileError(
            f"{where} must be {' or '.join(k.__name__ for k in kinds)}, "
            f"not {type(value).__name__}"
        )
    return value


def _verdict(value: Any, where: str) -> str:
    _expect(value, str, where)
    if value not in VERDICTS:
        raise VerdictFileError(f"{where} is {value[:40]!r}, not one of {VERDICTS}")
    return str(value)


@dataclass(frozen=True)
class Verdicts:
    """What one verdict file says of its model."""

    paths: dict[str, PathResult]
    reference_sound: bool
    notes: dict[str, list[str]]


def read_verdicts(path: Path, name: str) -> Verdicts:
    """The paths' results, whether every case's reference was sound and the
    notes on paths, from the verdict file ``path`` of gallery model
    ``name``; a VerdictFileError in one sentence naming the file and the
    field when it is not one."""
    try:
        document = files.read_json(path, MAX_VERDICT_BYTES)
    except OSError as exc:  # zoo.files.Refused too: no regular file, not JSON
        raise VerdictFileError(f"{path} cannot be read as JSON: {exc}") from None
    try:
        return _results(document, name)
    except VerdictFileError as exc:
        raise VerdictFileError(f"{path}: {exc}") from None


def _results(document: Any, name: str) -> Verdicts:
    _expect(document, dict, "the file")
    version = _expect(document.get("schema_version"), int, "schema_version")
    if version not in SCHEMA_VERSIONS:
        raise VerdictFileError(
            f"schema_version is {version}; this table reads {SCHEMA_VERSIONS}"
        )
    rule = _expect(document.get("rule"), dict, "rule")
    multiple = float(_expect(rule.get("multiple"), (int, float), "rule.multiple"))
    if not multiple > 0:
        raise VerdictFileError(f"rule.multiple is {multiple}; it must be positive")
    models = _expect(document.get("models"), dict, "models")
    if len(models) != 1:
        raise VerdictFileError(
            f"models holds {len(models)} models; a --model run judges one"
        )
    ((model, verdicts),) = models.items()
    if not model.startswith(f"{name}-"):
        raise VerdictFileError(f"models names {model[:60]!r}, not {name!r}")
    _expect(verdicts, dict, f"models[{model!r}]")
    if not verdicts:
        raise VerdictFileError(f"models[{model!r}] judges no path")
    cases = _expect(document.get("cases"), list, "cases")
    if not cases:
        raise VerdictFileError("cases is empty")
    needed: dict[str, float] = {}
    notes: dict[str, list[str]] = {}
    sound = True
    for i, case in enumerate(cases):
        sound &= _read_case(f"cases[{i}]", case, version, needed, notes)
    results = {
        path: PathResult(
            _verdict(verdict, f"models[{model!r}][{path!r}]"),
            needed.get(path),
            multiple,
        )
        for path, verdict in verdicts.items()
    }
    return Verdicts(results, sound, notes)


def _read_case(
    where: str,
    case: Any,
    version: int,
    needed: dict[str, float],
    notes: dict[str, list[str]],
) -> bool:
    """Check one case, fold its multiples into ``needed`` (the largest per
    path) and its notes into ``notes``; whether its reference was sound."""
    _expect(case, dict, where)
    sound = _expect(case.get("reference_sound"), bool, f"{where}.reference_sound")
    verdicts = _expect(case.get("verdicts"), dict, f"{where}.verdicts")
    for path, verdict in verdicts.items():
        _verdict(verdict, f"{where}.verdicts[{path!r}]")
    for path, m in _expect(case.get("multiples"), dict, f"{where}.multiples").items():
        value = float(_expect(m, (int, float), f"{where}.multiples[{path!r}]"))
        if value < 0:
            raise VerdictFileError(f"{where}.multiples[{path!r}] is negative")
        # NaN is the worst a path can need, and stays: max() would drop it
        old = needed.get(path, value)
        needed[path] = value if math.isnan(value) else max(old, value)
    if version >= NOTES_SINCE:
        for path, said in _expect(case.get("notes"), dict, f"{where}.notes").items():
            for j, note in enumerate(_expect(said, list, f"{where}.notes")):
                _expect(note, str, f"{where}.notes[{path!r}][{j}]")
                kept = notes.setdefault(path, [])
                if note not in kept:
                    kept.append(note)
    return bool(sound)


def door_sentence(stderr: Path) -> str | None:
    """The last ``error: `` line of a standard error file, without the
    prefix (the door's one sentence), or None when it has none."""
    lines = [line.strip() for line in _tail(stderr, STDERR_TAIL_BYTES).splitlines()]
    said = [
        line.removeprefix("error: ") for line in lines if line.startswith("error: ")
    ]
    return said[-1] if said else None


def _last_line(stderr: Path) -> str:
    lines = _tail(stderr, 4096).strip().splitlines()
    return lines[-1].strip() if lines else "its standard error is empty"


def _tail(stderr: Path, size: int) -> str:
    """The last ``size`` bytes of a standard error file, as text (through
    the door: a regular file, no link followed)."""
    with files.opened(stderr, MAX_STDERR_BYTES) as f:
        f.seek(max(0, f.seek(0, 2) - size))
        return f.read().decode("utf-8", errors="replace")


def row_of(folder: Path, name: str) -> Row:
    """What the folder says about gallery file ``<name>.keras``."""
    verdicts, stderr = folder / f"{name}.json", folder / f"{name}.stderr"
    if verdicts.is_file():
        try:
            found = read_verdicts(verdicts, name)
        except VerdictFileError as exc:
            return Row(name, "unreadable", str(exc))
        return Row(
            name,
            "accepted",
            paths=found.paths,
            reference_sound=found.reference_sound,
            notes=found.notes,
        )
    if stderr.is_file():
        said = door_sentence(stderr)
        if said is not None:
            # "gallery-results/<name>.keras: layer ...": the row names the file
            where, sep, rest = said.partition(f"{name}.keras: ")
            return Row(name, "refused", rest if sep and " " not in where else said)
        return Row(name, "no verdicts", f"no verdict file; {_last_line(stderr)}")
    return Row(name, "not run", f"neither {verdicts.name} nor {stderr.name}")


def gallery_examples() -> dict[str, tuple[str, str]]:
    """``gallery.EXAMPLES``, loaded from beside this file (no Keras)."""
    spec = importlib.util.spec_from_file_location("gallery", HERE / "gallery.py")
    assert spec is not None
    assert spec.loader is not None
    module: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.EXAMPLES)


def rows(folder: Path, examples: Mapping[str, tuple[str, str]]) -> list[Row]:
    """One row per ``.keras`` file in ``folder``: the gallery's in its
    order, then any other file by name."""
    names = {p.stem for p in folder.glob("*.keras") if p.is_file()}
    ordered = [n for n in examples if n in names] + sorted(names - set(examples))
    return [row_of(folder, name) for name in ordered]


def tables(
    found: list[Row], examples: Mapping[str, tuple[str, str]], markdown: bool
) -> str:
    """The summary, every accepted model's paths, and what the others said."""
    fmt = "github" if markdown else "simple"

    def example_of(name: str) -> str:
        if name not in examples:
            return "-"
        title, url = examples[name]
        return f"[{title}]({url})" if markdown else title

    summary = tabulate(
        [[r.name, example_of(r.name), r.status, r.all_pass] for r in found],
        headers=["model", "example", "door", "passes every path"],
        tablefmt=fmt,
    )
    accepted = [r for r in found if r.status == "accepted"]
    columns = list(dict.fromkeys(p for r in accepted for p in r.paths))
    judged = tabulate(
        [
            [r.name, *(_cell(r, p) if p in r.paths else "-" for p in columns)]
            for r in accepted
        ],
        headers=["model", *columns],
        tablefmt=fmt,
    )
    said = tabulate(
        [[r.name, r.status, r.said] for r in found if r.status != "accepted"],
        headers=["model", "door", "what it said"],
        tablefmt=fmt,
    )
    noted = tabulate(
        [
            [r.name, path, note]
            for r in accepted
            for path, said in r.notes.items()
            for note in said
        ],
        headers=["model", "path", "note"],
        tablefmt=fmt,
    )
    heading = "## " if markdown else ""
    counts = Counter(r.status for r in found)
    line = ", ".join(f"{n} {status}" for status, n in counts.items()) or "no models"
    return "\n\n".join(
        [
            f"{heading}The gallery: {len(found)} models ({line})",
            summary,
            f"{heading}Accepted models: each path's verdict and m (the multiple "
            "of a correct float32 computation's error it needed)",
            judged if accepted else "(none)",
            f"{heading}What Keras is known to compute differently (the tool's notes)",
            noted if any(r.notes for r in accepted) else "(none)",
            f"{heading}Refused and unjudged models",
            said if len(accepted) < len(found) else "(none)",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python examples/gallery_table.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("folder", type=Path, help="the gallery's results folder")
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        print(f"error: {args.folder} is not a folder", file=sys.stderr)
        return 2
    examples = gallery_examples()
    found = rows(args.folder, examples)
    print(tables(found, examples, markdown=False))
    if args.markdown:
        files.folder(args.markdown.parent, follow=True)
        files.write_text(args.markdown, tables(found, examples, markdown=True) + "\n")
        print(f"\nwrote {args.markdown}")
    unreadable = [r for r in found if r.status == "unreadable"]
    for r in unreadable:
        print(f"error: {r.said}", file=sys.stderr)
    return 1 if unreadable else 0


if __name__ == "__main__":
    sys.exit(main())
