"""Two count runs side by side: which paths' instructions per step changed
beyond what counts repeat to, and where.

A path's count is flagged when its work (every instruction but thread
pools' polling) or its non-kernel instructions per step moved by more than
its allowance: ``MARGIN`` times the widest spread between processes
(``harness.count.analysis``) of any cell of the path's framework in
either run, and never less than ``FLOOR``.  One cell's spread is a range
of two or three processes: small by luck as often as not (Keras on
PyTorch, ffn training: 0.007% in one run, then 0.15% away in the next),
so the framework's widest stands for all its cells.  A run of one process
has no spread between processes: its blocks' spreads stand in.  For a
flagged path the groups (interpreter, framework, system, kernel) and the
functions that moved most are named.
"""

from __future__ import annotations

from typing import Any

from harness.count.callgrind import GROUPS

MARGIN = 3.0  # times the measured spread
FLOOR = 0.001  # 0.1%: never flag less, however well counts repeated
MOVED_FUNCTIONS = 3  # functions named per flagged path


def _spread(row: dict[str, Any], key: str) -> float:
    if row["processes"] > 1:
        return float(row[f"{key}_spread"])
    return float(row[f"{key}_block_spread"])


def widest(runs: list[dict[str, Any]]) -> dict[tuple[str, str], float]:
    """Per framework and ``key`` (``work``, ``non_kernel``), the widest
    spread of any of its cells in ``runs`` (``analysis.cells``)."""
    out: dict[tuple[str, str], float] = {}
    for run in runs:
        for row in run["paths"]:
            for key in ("work", "non_kernel"):
                at = (row["framework"], key)
                out[at] = max(out.get(at, 0.0), _spread(row, key))
    return out


def allowance(spread: float) -> float:
    """The relative change that a measured ``spread`` explains."""
    return max(FLOOR, MARGIN * spread)


def _key(row: dict[str, Any]) -> tuple[str, str, str, int]:
    return row["model"], row["path"], row["phase"], row["batch"]


def compare(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per path and cell counted in both analyses
    (``harness.count.analysis.cells``): the change of work and non-kernel
    instructions per step, the allowance, ``changed`` or ``same``, and for
    a change the groups and functions that moved."""
    before = {_key(r): r for r in old["paths"]}
    spreads = widest([old, new])
    out = []
    for row in new["paths"]:
        was = before.get(_key(row))
        if was is None:
            continue
        found: dict[str, Any] = {
            "model": row["model"],
            "path": row["path"],
            "phase": row["phase"],
            "batch": row["batch"],
        }
        flagged = False
        for key in ("work", "non_kernel"):
            change = row[key] / was[key] - 1.0 if was[key] else 0.0
            allowed = allowance(spreads[(row["framework"], key)])
            found[f"{key}_change"] = change
            found[f"{key}_allowance"] = allowed
            flagged |= abs(change) > allowed
        found["verdict"] = "changed" if flagged else "same"
        found["groups_moved"] = {g: row["groups"][g] - was["groups"][g] for g in GROUPS}
        moved = {
            name: row["functions"].get(name, 0.0) - was["functions"].get(name, 0.0)
            for name in {*row["functions"], *was["functions"]}
        }
        found["functions_moved"] = [
            [name, n]
            for name, n in sorted(moved.items(), key=lambda kv: -abs(kv[1]))[
                :MOVED_FUNCTIONS
            ]
        ]
        out.append(found)
    return out


def markdown(rows: list[dict[str, Any]], old: str, new: str) -> str:
    """The comparison as Markdown."""
    if not rows:
        return f"{old} and {new} counted no path and cell in common."
    lines = [
        f"## Instructions per step: {new} against {old}",
        "",
        "Change of work and of non-kernel instructions per step, each with its "
        "allowance (three times the widest spread of the framework's cells).",
        "",
        "| model | path | phase | batch | work | allowed | non-kernel | allowed | "
        "verdict | groups moved (k per step) | functions moved most (k per step) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        groups = functions = ""
        if r["verdict"] == "changed":
            groups = ", ".join(
                f"{g} {n / 1e3:+.1f}"
                for g, n in sorted(
                    r["groups_moved"].items(), key=lambda kv: -abs(kv[1])
                )
                if abs(n) >= 0.5
            )
            functions = "; ".join(
                f"{name.split(' ', 2)[-1][:60]} {n / 1e3:+.1f}"
                for name, n in r["functions_moved"]
            )
        lines.append(
            f"| {r['model']} | {r['path']} | {r['phase']} | {r['batch']} | "
            f"{100 * r['work_change']:+.3f}% | {100 * r['work_allowance']:.2f}% | "
            f"{100 * r['non_kernel_change']:+.3f}% | "
            f"{100 * r['non_kernel_allowance']:.2f}% | {r['verdict']} | {groups} | "
            f"{functions} |"
        )
    changed = sum(r["verdict"] == "changed" for r in rows)
    lines += [
        "",
        f"{changed} of {len(rows)} path counts changed beyond their allowance.",
    ]
    return "\n".join(lines)
