"""What a drawn model's check found, how it is classified and named, and
the findings file a campaign keeps.

An ``Outcome`` is what the fuzzer keeps of one check (a
``equivalence.check.ModelReport``): every checked path's verdict, where
each failing path parts from float64 (stage and layer), why a path that
stopped stopped, and whether the float64 vote itself failed.

``classify`` says which paths part, in the order a reader triages them:

- ``the tool``: checking raised in the orchestrator (the project's bug);
- ``every path``: the spec or the judge (every checked path fails alike);
- ``the judge``: the float64 runs disagree (no reference, or an odd one out);
- ``one Keras backend``: a Keras path alone (its modes count with it): a
  Keras bug to report upstream, unless the allowance is wrong;
- ``one native path``: a hand-written path alone: the project's bug;
- ``one framework``: every checked path of one framework, Keras' and the
  native ones: the framework's operator, or the project's reading of it;
- ``several paths``: anything else, named.

The ``signature`` of a finding is its class, the failing paths (a path's
modes counted as the path: whether a mode was drawn is luck), and the
earliest place one of them parts from float64: the stage (forward, loss,
backward, update; ``compiled`` for a path whose op-by-op forward pass is
right and whose compiled one is not; or the error's type for a path that
stopped) and the
kind of the layer it was localized to: two drawn models
that part the same way at the same kind of layer are one finding, whatever
else they hold.  A float64 run voted out is placed the same way: the odd
run, the stage and the kind of layer where it parts from the others.
``Finding.id`` is a digest of the signature.

The findings file (``findings.jsonl``) gets one line per finding each time
a smaller model shows it (``harness.core.jsonl``: appended whole, fsynced,
so Ctrl-C or a crash keeps every line written); the last line of an id is
the finding (the smallest model's, where tasks of one campaign each wrote
one: ``read_findings``).  A campaign folder may be shared, so the file is read as data
from anyone: through a schema (``harness.core.validated``) whose ``id``
must be the digest of the line's ``signature`` (the id names the files
``--write`` makes, so no ``../../x``), whose ``kind`` is one of ``CLASSES``
and whose case is one a campaign draws; and each finding's model must
build (``zoo.user_models.spec_from_document``), so that a document without
layers is refused before a worker starts.  Lines that fail either are
skipped and named once on stderr.

Sightings.  Every checked model that shows a finding appends one line to
``sightings.jsonl`` (its id and the model's optimizer), whether or not its
model is smaller: a finding's ``seen`` and ``optimizers`` are counted from
those lines when it has any (a findings line's own ``seen`` is then only
its writer's count so far: a folder shared by campaigns at once, or a
sighting of a model no smaller, would otherwise be lost).  A folder written
before sightings were kept has none; its findings lines' counts stand.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, model_validator

from equivalence.keras_known import KNOWN, KNOWN_BUG
from harness.core import jsonl
from harness.core.validated import Count, Schema, checked
from harness.fuzz.draw import MAX_BATCH, MAX_SEED, MAX_STEPS, is_row_layer
from workers.paths import get_path
from zoo import files
from zoo.user_models import spec_from_document

FINDINGS = "findings.jsonl"
SIGHTINGS = "sightings.jsonl"
CLASSES = (
    "the tool",
    "every path",
    "the judge",
    "one Keras backend",
    "one native path",
    "one framework",
    "several paths",
)
# What a reader should do first, by class.
TRIAGE = {
    "the tool": "the tool raised while checking: the project's bug",
    "every path": "the spec or the judge: check the tool's own reading first",
    "the judge": "the tool's float64 implementations disagree: the tool's bug",
    "one Keras backend": "a Keras bug to report, unless the allowance is wrong",
    "one native path": "the project's hand-written code",
    "one framework": "the framework's operator, or the project's reading of it",
    "several paths": "read the paths named",
}
_FAILED = ("fail", "error")
SHOWN = 5  # findings whose model does not build a warning names


@dataclass(frozen=True)
class Outcome:
    """One check as the fuzzer keeps it.  ``verdicts``: every checked path's;
    ``located``: per failing path, ``(stage, layer kind)`` where it parts
    from float64 (``""`` when not localized); ``errors``: per path that
    stopped, its error's first line; ``judge``: why the float64 vote failed
    (empty when it did not); ``tool``: what the tool itself raised while
    checking (empty when nothing)."""

    verdicts: dict[str, str]
    located: dict[str, tuple[str, str]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    judge: str = ""
    notes: dict[str, list[str]] = field(default_factory=dict)
    tool: str = ""

    @property
    def failing(self) -> list[str]:
        return sorted(p for p, v in self.verdicts.items() if v in _FAILED)

    @property
    def found(self) -> bool:
        return bool(self.failing or self.judge or self.tool)

    @property
    def known(self) -> bool:
        """Whether every failing path's failure is one the check names as a
        known Keras bug (``equivalence.keras_known``: its page written, its
        reproducer run by a test), and nothing else failed."""
        return (
            bool(self.failing)
            and not (self.judge or self.tool)
            and all(
                any(n.startswith(KNOWN_BUG) for n in self.notes.get(p, []))
                for p in self.failing
            )
        )


def classify(outcome: Outcome) -> str:  # noqa: PLR0911 (one return per class)
    """The class of a failed check (``CLASSES``); ``""`` when it passed."""
    failing = outcome.failing
    if outcome.tool:
        return "the tool"
    if outcome.judge:
        return "the judge"
    if not failing:
        return ""
    checked_paths = [p for p, v in outcome.verdicts.items() if v != "unavailable"]
    if len(failing) == len(checked_paths) and len(failing) > 1:
        return "every path"
    infos = [get_path(p) for p in failing]
    bases = {p.split("@", maxsplit=1)[0] for p in failing}
    if len(bases) == 1:
        return "one Keras backend" if infos[0].api == "keras" else "one native path"
    frameworks = {info.framework for info in infos}
    if len(frameworks) == 1:
        framework = frameworks.pop()
        every = [p for p in checked_paths if get_path(p).framework == framework]
        if sorted(every) == failing and {i.api for i in infos} == {"keras", "native"}:
            return "one framework"
    return "several paths"


def _stage(outcome: Outcome, path: str) -> str:
    if path in outcome.errors:
        return "stopped: " + outcome.errors[path].split(":", maxsplit=1)[0][:60]
    stage, kind = outcome.located.get(path, ("", ""))
    return f"{stage} at {kind}" if stage and kind else stage or "not localized"


def signature(outcome: Outcome) -> str:
    """``class | paths | where``: what names one finding (module docstring)."""
    kind = classify(outcome)
    if kind == "the tool":
        return f"the tool | raised | {outcome.tool.split(':')[0][:80]}"
    if kind == "the judge":
        return f"the judge | float64 runs | {outcome.judge.split(':')[0][:80]}"
    failing = outcome.failing
    # the earliest place any failing path parts (what comes after it follows)
    first = min((_stage(outcome, p) for p in failing), key=_stage_order)
    # a path and its modes are one: whether a mode was drawn is luck
    bases = sorted({p.split("@", maxsplit=1)[0] for p in failing})
    return f"{kind} | {','.join(bases)} | {first}"


STAGES = ("stopped", "compiled", "forward", "loss", "backward", "update", "not")


def _stage_order(where: str) -> int:
    """Where a path parts, in the order a step runs (unlocalized last)."""
    word = where.split(maxsplit=1)[0].rstrip(":")
    return STAGES.index(word) if word in STAGES else len(STAGES)


def size(document: dict[str, Any], steps: int, batch_size: int) -> tuple[int, ...]:
    """How big a drawn model is, to keep the smallest: layers, then the
    values its layers hold (their sizes), then steps and batch.  A head's
    row layer (``harness.fuzz.draw.is_row_layer``) is not counted: a head
    that ends in a row and one that ends in an output per position are the
    same size, so the form of its head never outranks a model's steps and
    batch (Hypothesis shrinks a head to the row)."""
    layers = document["layers"]
    values = sum(
        v
        for entry in layers
        for v in entry.values()
        if isinstance(v, int) and not isinstance(v, bool)
    )
    body = [entry for entry in layers if not is_row_layer(entry)]
    return (len(body), values, steps, batch_size)


def finding_id(text: str) -> str:
    """A short stable id of a signature."""
    return hashlib.sha256(text.encode()).hexdigest()[:10]


@dataclass
class Finding:
    """One finding: its signature and class, the smallest drawn model that
    showed it (``document``, with the case: ``seed``, ``batch_size``,
    ``steps``, ``paths``), how many layers that model has, how many drawn
    models showed it, and the outcome of the smallest."""

    id: str
    signature: str
    kind: str
    document: dict[str, Any]
    seed: int
    batch_size: int
    steps: int
    paths: list[str]
    layers: int
    seen: int
    outcome: dict[str, Any]
    optimizers: list[str] = field(default_factory=list)

    def line(self) -> dict[str, Any]:
        return asdict(self)


class FindingSchema(Schema):
    """What a findings line must hold to be read back: named by its
    signature (``id``, ``kind``: module docstring), with a case a campaign
    draws (``harness.fuzz.draw``'s limits: a line cannot ask the workers
    for a billion steps)."""

    id: str
    signature: str
    kind: str
    document: dict[str, Any]
    seed: Annotated[int, Field(ge=0, le=MAX_SEED)]
    batch_size: Annotated[int, Field(ge=1, le=MAX_BATCH)]
    steps: Annotated[int, Field(ge=0, le=MAX_STEPS)]
    paths: list[str]
    layers: Count
    seen: Count
    outcome: dict[str, Any]
    optimizers: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _named_by_its_signature(self) -> FindingSchema:
        if self.kind not in CLASSES:
            raise ValueError(f"kind {self.kind!r} is not one of the classes")
        parts = self.signature.split(" | ")
        if len(parts) < 3 or parts[0] != self.kind:
            raise ValueError("a signature is 'class | paths | where'")
        if self.id != finding_id(self.signature):  # ten hex digits, no path
            raise ValueError("an id is its signature's digest")
        return self


class SightingSchema(Schema):
    """One sighting (module docstring): a finding's id (ten hex digits) and
    the optimizer of the model that showed it."""

    id: Annotated[str, Field(pattern=r"^[0-9a-f]{10}$")]
    optimizer: Annotated[str, Field(min_length=1, max_length=40)]


def sighted(folder: Path, ident: str, optimizer: str) -> None:
    """Append one sighting of ``ident`` (module docstring)."""
    files.folder(folder, follow=True)
    jsonl.append(folder / SIGHTINGS, {"id": ident, "optimizer": optimizer})


def read_sightings(folder: Path) -> dict[str, list[str]]:
    """Each finding's sightings in ``folder``: the optimizers of the models
    that showed it, one per model; none when there is no file.  Lines that
    do not fit are skipped and named once on stderr."""
    try:
        lines, _ = checked(
            folder / SIGHTINGS, SightingSchema, ("a sighting", "sightings")
        )
    except FileNotFoundError:
        return {}
    found: dict[str, list[str]] = {}
    for line in lines:
        found.setdefault(line["id"], []).append(line["optimizer"])
    return found


def read_findings(folder: Path) -> dict[str, Finding]:
    """The findings of ``folder``'s file by id (of the lines of each that
    are read, the smallest model's, the latest of equals: campaigns sharing
    the folder may each write one; counted from its sightings: module
    docstring); none when there is no file.  Lines that do not fit the schema,
    and findings whose model does not build, are skipped and named once on
    stderr (module docstring).

    Raises ValueError when the file holds none that is read, OSError
    (``zoo.files.Refused``...) when it cannot be read."""
    path = folder / FINDINGS
    try:
        lines, _ = checked(path, FindingSchema, ("a finding", "findings"))
    except FileNotFoundError:
        return {}
    found: dict[str, Finding] = {}
    broken: dict[str, str] = {}
    for line in lines:
        reason = unbuilt(line["document"])
        if reason:
            broken[line["id"]] = reason
            continue
        known = Finding(
            **{k: line[k] for k in Finding.__dataclass_fields__ if k in line}
        )
        earlier = found.get(line["id"])
        if earlier is None or _size(known) <= _size(earlier):
            found[line["id"]] = known
    if broken:
        named = [f"{ident} ({why})" for ident, why in list(broken.items())[:SHOWN]]
        more = f" and {len(broken) - SHOWN} more" if len(broken) > SHOWN else ""
        jsonl.warn(
            f"warning: skipped findings of {path} whose model does not build: "
            f"{'; '.join(named)}{more}"
        )
    if not found:
        raise ValueError(
            f"{path} holds no finding whose model builds; move it aside to "
            "start the campaign's findings anew"
        )
    for ident, optimizers in read_sightings(folder).items():
        if ident in found:
            finding = found[ident]
            finding.seen = len(optimizers)
            finding.optimizers = sorted({*finding.optimizers, *optimizers})
    return found


def _size(finding: Finding) -> tuple[int, ...]:
    return size(finding.document, finding.steps, finding.batch_size)


def unbuilt(document: dict[str, Any]) -> str:
    """Why a finding's model does not build as a campaign builds it
    (``spec_from_document``, as ``register`` does before a worker sees
    it); ``""`` when it does."""
    try:
        spec_from_document("finding", document)
    except (ValueError, KeyError, TypeError) as exc:
        return str(exc).split("\n", maxsplit=1)[0][:200] or type(exc).__name__
    return ""


def keep(folder: Path, finding: Finding) -> None:
    """Append ``finding`` to the findings file (its newest line)."""
    files.folder(folder, follow=True)
    jsonl.append(folder / FINDINGS, finding.line())


def known_bugs(finding: Finding) -> list[str]:
    """The known Keras bugs (``equivalence.keras_known.KNOWN``, by name)
    that the check of ``finding``'s model named on some path: what a
    campaign rediscovered, counted (``harness fuzz`` says them;
    docs/results/fuzz/rediscovery.py times them)."""
    said = {n for notes in finding.outcome.get("notes", {}).values() for n in notes}
    return [k.name for k in KNOWN if k.bug and f"{KNOWN_BUG}: {k.sentence}" in said]


def outcome_line(outcome: Outcome) -> dict[str, Any]:
    """An outcome as JSON (tuples as lists)."""
    line: dict[str, Any] = json.loads(json.dumps(asdict(outcome)))
    return line
