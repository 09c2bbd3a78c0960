"""Reading a converge run's records: per model, each path's time and steps
to the target, its final accuracy, the ensemble's vote on who judges, and
whether each path's curve stays within the judges' allowance
(``harness.converge.agreement``); the accuracy-against-time curves as a
plot.  Framework-free."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from tabulate import tabulate

from harness.converge.agreement import Vote, disagreement, reached, vote
from harness.core import validated
from harness.core.validated import Count, Seconds
from workers.paths import get_path
from zoo import files

Fraction = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]


class Record(validated.Schema):
    """What the report reads of a converge record (``harness.converge.run``
    writes more)."""

    schema_: Literal[1] = Field(alias="schema")
    model: str
    path: str
    role: Literal["path", "ensemble"] = "path"
    status: str
    verdict: str | None = None
    ensemble_path: str | None = None  # records before the vote: one implementation
    ensemble_paths: list[str] | None = None
    nudge_ulps: Annotated[int, Field(ge=1)] | None = None  # before: one ulp
    source: str | None = None
    target: Fraction | None = None
    train_samples: Count | None = None
    test_samples: Count | None = None
    batch_size: Count | None = None
    batches_per_epoch: Annotated[int, Field(ge=1)] | None = None
    accuracy: list[Fraction] | None = None
    train_s: list[Seconds] | None = None

    @field_validator("path")
    @classmethod
    def _known(cls, path: str) -> str:
        get_path(path)  # ValueError for a path this version does not know
        return path

    @model_validator(mode="after")
    def _trained(self) -> Record:
        """A run that trained has a curve: an accuracy and the seconds of
        each epoch, at least one, as many of each."""
        if self.status == "ok" and not (
            self.accuracy
            and self.train_s
            and len(self.accuracy) == len(self.train_s)
            and self.batches_per_epoch is not None
        ):
            raise ValueError("a trained run needs its curve")
        return self


@dataclass
class ModelRuns:
    """One model's records: its paths, its ensemble and what they set."""

    model: str
    info: dict[str, Any]
    paths: list[dict[str, Any]] = field(default_factory=list)
    ensemble: list[dict[str, Any]] = field(default_factory=list)

    def implementations(self) -> list[str]:
        """The ensemble's paths, in the profile's order (a record written
        before the vote names one)."""
        named = self.info.get("ensemble_paths") or [self.info.get("ensemble_path")]
        return [str(p) for p in named if p]

    def curves(self, implementation: str) -> list[list[float]]:
        """One implementation's accuracy curves: its plain run (as a path or
        as the ensemble's nudge 0) first, then its nudged runs."""
        mine = [
            r
            for r in self.paths + self.ensemble
            if r["path"] == implementation and r.get("status") == "ok"
        ]
        mine.sort(key=lambda r: (r.get("role") == "ensemble", r.get("nudge") or 0))
        return [r["accuracy"] for r in mine]

    @property
    def vote(self) -> Vote:
        return vote(
            {i: self.curves(i) for i in self.implementations()},
            int(self.info.get("test_samples") or 0),
        )

    def verdict(self, record: dict[str, Any], decided: Vote | None = None) -> str:
        """``agrees``, ``differs: <why>``, or why it cannot be said."""
        if record.get("status") != "ok":
            return str(record.get("status"))
        decided = decided or self.vote
        allowed = decided.allowed
        if allowed is None:
            return "no judge" if self.implementations() else "no ensemble"
        why = disagreement(record["accuracy"], allowed)
        return "agrees" if why is None else f"differs: {why}"


@dataclass
class Converged:
    """Every model of one records file."""

    file: Path
    models: dict[str, ModelRuns]
    skipped: int = 0

    @property
    def ok(self) -> bool:
        """Every path trained and agrees, and every implementation of the
        ensemble is among the judges (one found wrong is the tool's own
        trust failing, whether or not its path was trained)."""
        return not self.failures()

    def closing(self) -> str:
        """The run's last line: all agree, or what failed."""
        said = self.failures()
        return (
            "converge: every path trained and agrees with the judges"
            if not said
            else "converge FAILED: " + "; ".join(said)
        )

    def failures(self) -> list[str]:
        """What failed, per model: no judge, an ensemble implementation
        found wrong (the tool's own judge) first, then the paths."""
        said = []
        for m in self.models.values():
            decided = m.vote
            if not decided.judges:
                said.append(f"{m.model}: no judge ({decided.sentence})")
                continue
            if decided.odd:
                said.append(
                    f"{m.model}: the ensemble's {' and '.join(decided.odd)} "
                    "disagreed with the other implementations, so a judge was wrong"
                )
            off = [r["path"] for r in m.paths if m.verdict(r, decided) != "agrees"]
            if off:
                said.append(f"{m.model}: {', '.join(off)} did not train or agree")
        return said


def latest(folder: Path) -> Path:
    """The newest records file of ``folder`` (or ``folder`` itself, a file)."""
    if folder.is_file():
        return folder
    # A run that stopped before its first record left its file empty.
    found = [f for f in sorted(folder.glob("converge-*.jsonl")) if f.stat().st_size]
    if not found:
        raise ValueError(
            f"no converge records in {folder}: run `python -m harness converge` first"
        )
    return found[-1]


def load(file: Path) -> Converged:
    """The records of ``file``, by model (:class:`Record`: lines of another
    shape, or of a path this version does not know, skipped and named on
    stderr; ValueError when none is left)."""
    models: dict[str, ModelRuns] = {}
    records, skipped = validated.checked(
        file, Record, ("a converge record", "converge records")
    )
    for record in records:
        runs = models.setdefault(record["model"], ModelRuns(record["model"], record))
        (runs.ensemble if record.get("role") == "ensemble" else runs.paths).append(
            record
        )
    return Converged(file, models, len(skipped))


def rows(runs: ModelRuns) -> list[list[Any]]:
    """One row per path (``HEADERS``): the table of ``text``."""
    target = runs.info.get("target")
    decided = runs.vote
    out: list[list[Any]] = []
    for r in runs.paths:
        if r.get("status") != "ok":
            why = (
                "not trained"
                if r.get("status") == "not-trained"
                else runs.verdict(r, decided)
            )
            out.append([r["path"], r.get("verdict"), *["-"] * 6, why])
            continue
        accuracy, seconds = r["accuracy"], r["train_s"]
        hit = reached(accuracy, seconds, target)
        native = _native_seconds(runs, r["path"])
        steady = statistics.median(seconds[1:]) if len(seconds) > 1 else seconds[0]
        out.append(
            [
                r["path"],
                r.get("verdict"),
                f"{accuracy[-1]:.4f}",
                len(accuracy),
                "not reached" if hit is None else f"{hit[1]:.1f}",
                "-" if hit is None or native is None else f"{hit[1] / native:.2f}",
                "-" if hit is None else hit[0] * int(runs.info["batches_per_epoch"]),
                f"{steady:.2f}",
                runs.verdict(r, decided),
            ]
        )
    return out


def _native_seconds(runs: ModelRuns, path: str) -> float | None:
    """For a Keras path, the training seconds its framework's native path
    took to the target (None for a native path, or when it did not reach it)."""
    info = get_path(path)
    if info.api != "keras":
        return None
    native = f"native-{info.framework}"
    for r in runs.paths:
        if r["path"] == native and r.get("status") == "ok":
            hit = reached(r["accuracy"], r["train_s"], runs.info.get("target"))
            return None if hit is None else hit[1]
    return None


HEADERS = [
    "path",
    "gate",
    "final accuracy",
    "epochs",
    "s to target",
    "x native",
    "steps to target",
    "s per epoch",
    "curve",
]


def text(found: Converged) -> str:
    """Every model's table, with its data, target and allowance."""
    parts = [f"converge records: {found.file}", "", *answer(found)]
    if found.skipped:
        parts.append(f"({found.skipped} lines of another format skipped)")
    for runs in found.models.values():
        info = runs.info
        target = info.get("target")
        decided = runs.vote
        allowed = decided.allowed
        width = (
            "no ensemble ran"
            if allowed is None
            else f"ensemble of {allowed.runs} runs on {' and '.join(decided.judges)}; "
            f"allowance at the last epoch {allowed.low[-1]:.4f} to "
            f"{allowed.high[-1]:.4f}"
        )
        parts += [
            "",
            f"== {runs.model}: {info.get('source')} ==",
            f"{info.get('train_samples')} training samples in "
            f"{info.get('batches_per_epoch')} mini-batches of "
            f"{info.get('batch_size')}, "
            f"{info.get('test_samples')} test samples; target "
            f"{'none' if target is None else f'{target:.3f}'}; {width}",
            *([decided.sentence] if decided.sentence else []),
            "s to target: training seconds (the timed closure, compilation in the "
            "first epoch) summed to the first epoch at the target; x native: a "
            "Keras path's over its framework's native path; s per epoch: the "
            "median after the first",
            tabulate(rows(runs), headers=HEADERS, disable_numparse=True),
        ]
    return "\n".join(parts)


def answer(found: Converged) -> list[str]:
    """The answer first, one line per model: which paths agree with the
    ensemble, and Keras' time to the target over its native path's per
    framework."""
    out = ["answer:"]
    for runs in found.models.values():
        decided = runs.vote
        verdicts = {r["path"]: runs.verdict(r, decided) for r in runs.paths}
        off = sorted(path for path, v in verdicts.items() if v != "agrees")
        agree = (
            f"all {len(verdicts)} paths agree with "
            f"{' and '.join(decided.judges) or 'no judge'}"
            if not off
            else f"{len(verdicts) - len(off)} of {len(verdicts)} paths agree; "
            f"not: {', '.join(off)}"
        )
        ratios = []
        for row in rows(runs):
            path, over = row[0], row[5]
            if path.startswith("keras-") and over != "-":
                ratios.append(f"{path.removeprefix('keras-')} {over}x")
        target = runs.info.get("target")
        to = (
            f"; Keras' time to accuracy {target:.3f} over native's: {', '.join(ratios)}"
            if ratios and isinstance(target, int | float)
            else ""
        )
        judged = f" ({decided.sentence})" if decided.sentence else ""
        out.append(f"- {runs.model}: {agree}{to}{judged}")
    return out


# One colour per framework: Keras solid, native dashed.
COLORS = {"jax": "C0", "tensorflow": "C1", "torch": "C2", "mxnet": "C3"}


def plot(found: Converged, out_dir: Path) -> Path:
    """Test accuracy against cumulative training seconds, a panel per model
    (a colour per framework, Keras solid and native dashed, the ensemble's
    runs grey); the PNG written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(found.models.values())
    fig, axes = plt.subplots(
        1, len(models), figsize=(6 * len(models), 4.5), squeeze=False
    )
    for ax, runs in zip(axes[0], models, strict=True):
        for r in runs.ensemble:
            if r.get("status") == "ok":
                ax.plot(_elapsed(r["train_s"]), r["accuracy"], color="0.75", lw=1)
        for r in runs.paths:
            if r.get("status") == "ok":
                info = get_path(r["path"])
                ax.plot(
                    _elapsed(r["train_s"]),
                    r["accuracy"],
                    "-" if info.api == "keras" else "--",
                    color=COLORS.get(info.framework, "k"),
                    marker="x" if "hybrid" in r["path"] else ".",
                    label=r["path"],
                )
        target = runs.info.get("target")
        if target is not None:
            ax.axhline(target, color="k", lw=0.6, ls=":")
        ax.set_xscale("log")
        ax.set_title(f"{runs.model} ({runs.info.get('train_samples')} samples)")
        ax.set_xlabel("training seconds (log)")
        ax.set_ylabel("test accuracy")
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = files.folder(out_dir, follow=True) / "converge.png"
    files.write_figure(path, fig, dpi=110)  # never through a link there
    plt.close(fig)
    return path


def _elapsed(seconds: list[float]) -> list[float]:
    total, out = 0.0, []
    for s in seconds:
        total += s
        out.append(total)
    return out
