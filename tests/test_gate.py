"""The gate's cache key changes with everything that could change a verdict."""

from __future__ import annotations

import sys
from pathlib import Path

from harness.gate import library_versions, sources_digest, verdict_key


def _key(**changes: object) -> str:
    args: dict[str, object] = {
        "model": "ffn",
        "path": "native-torch",
        "weights_sha": "w",
        "sources": "s",
        "versions": {"torch": "2.13.0"},
    }
    args.update(changes)
    return verdict_key(**args)  # type: ignore[arg-type]


def test_the_key_depends_on_model_path_weights_sources_and_versions() -> None:
    base = _key()
    assert _key() == base
    assert _key(model="lenet") != base
    assert _key(path="keras-torch") != base
    assert _key(weights_sha="other") != base
    assert _key(sources="edited") != base
    assert _key(versions={"torch": "2.14.0"}) != base


def test_editing_a_model_source_or_the_path_registry_changes_the_digest(
    tmp_path: Path,
) -> None:
    for folder in ("zoo", "native", "workers", "equivalence", "harness"):
        (tmp_path / folder).mkdir()
    model = tmp_path / "native" / "lenet.py"
    model.write_text("padding = 'same'\n")
    registry = tmp_path / "workers" / "paths.py"
    registry.write_text("PATHS = ['native-torch']\n")
    (tmp_path / "harness" / "gate.py").write_text("")
    before = sources_digest(tmp_path)
    assert sources_digest(tmp_path) == before
    model.write_text("padding = 'valid'\n")
    assert sources_digest(tmp_path) != before
    model.write_text("padding = 'same'\n")
    assert sources_digest(tmp_path) == before
    registry.write_text("PATHS = ['native-torch', 'native-torch-compile']\n")
    assert sources_digest(tmp_path) != before


def test_library_versions_are_read_by_the_environment_itself() -> None:
    versions = library_versions(sys.executable)
    assert versions["numpy"]
    assert versions["python"] == sys.executable
    assert "error" in library_versions("/no/such/python")
