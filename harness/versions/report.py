"""``python -m harness report --versions``: Keras' overhead against the
release, from what ``harness versions`` wrote.

Three tables, oldest release first:

- *environments*: each combination's status (ran, unavailable with pip's
  reason, failed) and every path's equivalence verdict there, with the
  gate's reason for a path it held back;
- *overhead*: per model, backend, phase and batch size, the paired
  Keras/native ratio with its 95% CI in every release, and its change from
  the previous release that ran, with the change's 95% CI and the verdict of
  ``report --compare`` (the hierarchical bootstrap of
  ``harness.stats.paired.compare``: ``higher`` or ``lower`` at p < 0.01 with
  at least three processes a side, else ``same``);
- *instructions*, where ``harness versions --count`` counted: Keras' and
  native work per step, the work ratio and the non-kernel instructions Keras
  adds, and the change of the Keras path's count from the previous release
  beyond what counts repeat to (``harness.count.compare``), with the groups
  that moved.

``plot`` draws the overhead ratio against the release, one panel per model
and phase, a line per backend and batch size.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core.records import Record
from harness.count import analysis as count_analysis
from harness.count import compare as count_compare
from harness.count.measure import latest as latest_count
from harness.count.measure import read as read_count
from harness.report.analysis import compare_pair_rows, overhead_rows
from harness.report.tables import latest_run, load, render
from harness.versions.run import outcomes
from zoo import files

Key = tuple[str, str, str, int]  # model, framework, phase, batch size


def release_order(text: str) -> tuple[tuple[int, str], ...]:
    """A sort key that puts 3.9.2 before 3.10.0."""
    return tuple(
        (int(part), "") if part.isdigit() else (-1, part)
        for part in re.split(r"[.\-]", text)
    )


def _ordered(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def key(line: dict[str, Any]) -> tuple[Any, ...]:
        release = line.get("release", {})
        return tuple(
            release_order(str(release.get(axis, ""))) for axis in line.get("varied", [])
        )

    return sorted(found, key=key)


class Versions:
    """The combinations of a versions folder, oldest first, with the records
    of those that ran."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.lines = _ordered(outcomes(base))
        self.records: dict[str, list[Record]] = {}
        for line in self.lines:
            out = base / line["folder"]
            if line["status"] == "ok" and list(out.glob("run-*.jsonl")):
                self.records[line["slug"]] = load(latest_run(out))

    def ran(self) -> list[dict[str, Any]]:
        return [line for line in self.lines if line["slug"] in self.records]


def environment_rows(v: Versions) -> list[dict[str, Any]]:
    """One row per combination: its status and its paths' verdicts."""
    rows = []
    for line in v.lines:
        verdicts = line.get("verdicts") or {}
        shown = ", ".join(
            f"{path} {found['equivalence']}"
            + (f" ({found['reason']})" if found.get("reason") else "")
            for path, found in sorted(verdicts.items())
        )
        rows.append(
            {
                "releases": line["label"],
                "status": line["status"],
                "reason": line.get("reason"),
                "verdicts": shown or None,
                "notes": "; ".join(line.get("notes") or []) or None,
            }
        )
    return rows


def _key(row: dict[str, Any]) -> Key:
    return row["model"], row["framework"], row["phase"], row["batch_size"]


def overhead_version_rows(v: Versions) -> list[dict[str, Any]]:
    """The overhead ratio per cell and release, with its change from the
    previous release that measured the cell."""
    by_release: list[tuple[str, dict[Key, dict[str, Any]], list[Record]]] = []
    for line in v.ran():
        recs = v.records[line["slug"]]
        rows = {_key(r): r for r in overhead_rows(recs) if r["overhead"] is not None}
        by_release.append((line["label"], rows, recs))
    keys = sorted({k for _, rows, _ in by_release for k in rows})
    # each pair of releases compared once (a bootstrap per cell), whatever
    # cells it serves
    compared: dict[tuple[int, int], dict[Key, dict[str, Any]]] = {}
    out = []
    for key in keys:
        previous: int | None = None
        for index, (label, rows, recs) in enumerate(by_release):
            row = rows.get(key)
            if row is None:
                continue
            change: dict[str, Any] = {}
            if previous is not None:
                if (previous, index) not in compared:
                    compared[(previous, index)] = _changes(
                        by_release[previous][2], recs
                    )
                change = compared[(previous, index)].get(key, {})
            out.append(
                {
                    "model": key[0],
                    "framework": key[1],
                    "phase": key[2],
                    "batch_size": key[3],
                    "releases": label,
                    "overhead": row["overhead"],
                    "overhead_ci_low": row["overhead_ci_low"],
                    "overhead_ci_high": row["overhead_ci_high"],
                    "pairs": row["pairs"],
                    "equivalence": f"{row['keras_equivalence']}/"
                    f"{row['native_equivalence']}",
                    "change_pct": change.get("change_pct"),
                    "change_ci_low_pct": change.get("change_ci_low_pct"),
                    "change_ci_high_pct": change.get("change_ci_high_pct"),
                    "verdict": change.get("verdict"),
                    "busy": row["busy"],
                    "mark": row["mark"],
                }
            )
            previous = index
    return out


def _changes(old: list[Record], new: list[Record]) -> dict[Key, dict[str, Any]]:
    """``report --compare``'s paired rows of two releases, by cell."""
    return {_key(r): r for r in compare_pair_rows(old, new)}


def count_version_rows(v: Versions) -> list[dict[str, Any]]:
    """Instructions per step per cell and release, where counted, with the
    Keras path's change from the previous release that counted it."""
    counted: list[tuple[str, dict[str, Any]]] = []
    for line in v.ran():
        found = latest_count(v.base / line["folder"])
        if found is not None:
            counted.append((line["label"], count_analysis.cells(read_count(found))))
    out = []
    previous: dict[str, Any] | None = None
    for label, cells in counted:
        moved: dict[tuple[str, str, str, int], dict[str, Any]] = {}
        if previous is not None:
            for row in count_compare.compare(previous, cells):
                moved[(row["model"], row["path"], row["phase"], row["batch"])] = row
        for pair in cells["pairs"]:
            path = f"keras-{pair['framework']}"
            change = moved.get((pair["model"], path, pair["phase"], pair["batch"]))
            out.append(
                {
                    "model": pair["model"],
                    "framework": pair["framework"],
                    "phase": pair["phase"],
                    "batch_size": pair["batch"],
                    "releases": label,
                    "keras_M": round(pair["keras"] / 1e6, 3),
                    "native_M": round(pair["native"] / 1e6, 3),
                    "work_ratio": round(pair["work_ratio"], 3),
                    "added_non_kernel_M": round(pair["added_non_kernel"] / 1e6, 3),
                    "keras_change_pct": _pct(change, "non_kernel_change"),
                    "allowed_pct": _pct(change, "non_kernel_allowance"),
                    "verdict": change["verdict"] if change else None,
                    "groups_moved": _groups(change),
                }
            )
        previous = cells
    return out


def _pct(row: dict[str, Any] | None, key: str) -> float | None:
    return None if row is None else round(100 * row[key], 3)


def _groups(row: dict[str, Any] | None) -> str | None:
    """The groups whose instructions per step moved, for a changed count."""
    if row is None or row["verdict"] != "changed":
        return None
    moved = sorted(row["groups_moved"].items(), key=lambda kv: -abs(kv[1]))
    return ", ".join(f"{g} {n / 1e3:+.1f}k" for g, n in moved if abs(n) >= 500) or None


def text(base: Path, fmt: str) -> str:
    """The tables of the versions folder ``base``: all three for ``table``
    and ``markdown``; the overhead table alone for ``csv`` and ``json``."""
    v = Versions(base)
    if fmt in ("csv", "json"):
        return render(overhead_version_rows(v), fmt)
    overheads = overhead_version_rows(v)
    sections: list[tuple[str, Callable[[Versions], list[dict[str, Any]]]]] = [
        ("Overhead (Keras / native time) per release", lambda _: overheads),
        ("Instructions per step per release", count_version_rows),
        ("Environments", environment_rows),
    ]
    parts = [
        _titled(
            "The answer: what changed between releases", _answer(overheads, fmt), fmt
        )
    ]
    for title, build in sections:
        rows = build(v)
        if rows:
            parts.append(_titled(title, render(rows, fmt), fmt))
    return "\n\n".join(parts)


def _answer(rows: list[dict[str, Any]], fmt: str) -> str:
    """Each overhead that changed from one release to the next (the paired
    test's ``higher`` or ``lower``), then how many changes were tested."""
    tested = [r for r in rows if r["verdict"] is not None]
    moved = [r for r in tested if r["verdict"] in ("higher", "lower")]
    bullet = "- " if fmt == "markdown" else ""
    lines = [
        f"{bullet}{r['model']} {r['phase']} on {r['framework']} b{r['batch_size']}: "
        f"overhead {r['verdict']} at {r['releases']}, {r['overhead']:.2f} "
        f"({r['change_pct']:+.0f}% [{r['change_ci_low_pct']:+.0f}, "
        f"{r['change_ci_high_pct']:+.0f}])"
        for r in moved
        if r["change_pct"] is not None
        and r["change_ci_low_pct"] is not None
        and r["change_ci_high_pct"] is not None
    ]
    releases = len({r["releases"] for r in rows})
    lines.append(
        f"{bullet}{len(moved)} of {len(tested)} changes from one release to the "
        f"next were flagged, over {releases} releases"
        if tested
        else f"{bullet}no cell was timed in two releases: nothing to compare"
    )
    return "\n".join(lines)


def _titled(title: str, body: str, fmt: str) -> str:
    return f"## {title}\n\n{body}" if fmt == "markdown" else f"{title}\n{body}"


def plot(base: Path, out_dir: Path) -> Path | None:
    """``versions.png`` in ``out_dir``: the overhead ratio (95% CI) against
    the release, a panel per model and phase; None when nothing was timed."""
    v = Versions(base)
    rows = overhead_version_rows(v)
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({(r["model"], r["phase"]) for r in rows}, key=lambda p: p)
    labels = [line["label"] for line in v.ran()]  # oldest first
    fig, axes = plt.subplots(
        1, len(panels), figsize=(5 * len(panels), 4), squeeze=False
    )
    for ax, (model, phase) in zip(axes[0], panels, strict=True):
        lines: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            if (r["model"], r["phase"]) == (model, phase):
                lines.setdefault(f"{r['framework']} b{r['batch_size']}", []).append(r)
        for name, points in sorted(lines.items()):
            x = [labels.index(p["releases"]) for p in points]
            y = [p["overhead"] for p in points]
            err = [
                [p["overhead"] - p["overhead_ci_low"] for p in points],
                [p["overhead_ci_high"] - p["overhead"] for p in points],
            ]
            ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=name)
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        ax.set_title(f"{model} {phase}: Keras / native (95% CI)")
        ax.set_ylabel("overhead (x)")
        ax.legend(fontsize=8)
    path = files.folder(out_dir, follow=True) / "versions.png"
    fig.tight_layout()
    files.write_figure(path, fig, dpi=120)  # never through a link there
    plt.close(fig)
    return path
