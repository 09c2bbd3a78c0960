"""Findings written as reports (placeholder until the writer lands)."""

from __future__ import annotations

from pathlib import Path

from harness.fuzz.findings import Finding


def write_all(findings: dict[str, Finding], folder: Path) -> list[Path]:
    raise NotImplementedError
