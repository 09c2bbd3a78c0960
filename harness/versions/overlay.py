"""A Keras release over an environment that has everything else: an overlay.

A Keras release is a pure-Python wheel.  Instead of a full environment per
release (some 3 GB: the backends, the project, the harness' libraries), an
overlay is a folder that holds that one wheel, installed with ``--no-deps``
(plus any requirement of the release the base environment does not meet),
and is put first on ``PYTHONPATH`` of the base interpreter, which has the
project's pinned backends.  Every process of a run in the overlay, workers
included (``workers.launch`` keeps a ``PYTHONPATH`` it is given), then
imports that Keras, and the gate reads its version from its metadata, so
its verdicts are that release's.

Overlays live in ``.nox/release-overlays/keras-<release>`` of the checkout
and are reused; a file in each, written last, says what was installed, so
one whose build was cut off is built again.  A release pip does not have is
refused before anything is built (``harness.versions.bisect.between``).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from pydantic import Field

from harness.core import validated
from harness.versions.environments import pip_error, read_stamp, run_pip
from workers.launch import PROJECT_ROOT
from zoo import files
from zoo.user_models import plain_name

UNDER = Path(".nox") / "release-overlays"
STAMP = "harness-overlay.json"
# The most a Keras wheel may hold (a release is some 1.5 MB) and its
# METADATA inflated (the project's description and requirements, some
# kilobytes): a wheel past either is no Keras release.
WHEEL_BYTES = 64 * 1024 * 1024
METADATA_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Overlay:
    """A release's overlay: the interpreter to run, the folder to put first
    on its path, what was added beside Keras, and its size on disk."""

    release: str
    python: str
    site: Path
    added: tuple[str, ...]
    bytes: int

    def environment(self) -> dict[str, str]:
        """``os.environ`` with the overlay first on ``PYTHONPATH``."""
        env = dict(os.environ)
        rest = env.get("PYTHONPATH", "")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(self.site), rest) if p)
        return env


def requirements(wheel: Path) -> list[Requirement]:
    """The requirements a wheel's metadata names for this interpreter (no
    extras).  Only its METADATA is read, within ``WHEEL_BYTES`` and
    ``METADATA_BYTES`` (``zoo.files``: a wheel that is no zip archive, or a
    member that inflates past its limit, is refused in one sentence); pip
    installs the wheel."""
    with files.open_zip(wheel, WHEEL_BYTES) as archive:
        name = next(
            (n for n in archive.namelist() if n.endswith(".dist-info/METADATA")),
            None,
        )
        if name is None:
            raise ValueError(f"{wheel.name} has no METADATA")
        where = f"{wheel.name}: {name}"
        data = files.member_bytes(archive, name, METADATA_BYTES, where)
        text = data.decode("utf-8", errors="replace")
    out = []
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        try:
            requirement = Requirement(line.removeprefix("Requires-Dist:").strip())
        except InvalidRequirement:
            continue
        marker = requirement.marker
        if marker is None or marker.evaluate({"extra": ""}):
            out.append(requirement)
    return out


def installed(python: str) -> dict[str, str]:
    """Every distribution ``python`` has, by canonical name, with its
    version."""
    script = (
        "import json, importlib.metadata as m\n"
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()"
        " if d.metadata['Name']}))"
    )
    done = subprocess.run(
        [python, "-c", script],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    if done.returncode != 0:
        raise ValueError(
            f"{python} cannot list its distributions: {done.stderr[-300:]}"
        )
    found: dict[str, str] = json.loads(done.stdout)
    return {canonicalize_name(k): v for k, v in found.items()}


def unmet(wanted: list[Requirement], have: dict[str, str]) -> list[str]:
    """The requirements of ``wanted`` that ``have`` does not meet, as pip
    takes them."""
    out = []
    for requirement in wanted:
        version = have.get(canonicalize_name(requirement.name))
        if version is None or (
            requirement.specifier and version not in requirement.specifier
        ):
            out.append(f"{requirement.name}{requirement.specifier}")
    return out


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    """pip with ``args``, by ``harness.versions.environments``' runner (its
    timeout, its output kept)."""
    return run_pip([sys.executable, "-m", "pip", *args, "--quiet"])


def size(folder: Path) -> int:
    """Bytes of the files under ``folder``."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def prepare(
    release: str, python: str = sys.executable, root: Path = PROJECT_ROOT
) -> Overlay:
    """The overlay of keras ``release`` over ``python``, built or reused;
    one process at a time builds it (two bisections may share a release).

    Raises ValueError with pip's reason when it cannot be built."""
    plain_name(release, "release")  # it names the overlay's folder
    files.folder(root / UNDER)
    lock = files.open_append(root / UNDER / f"keras-{release}.lock")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _prepare(release, python, root)
    finally:
        os.close(lock)  # and the lock with it


def _prepare(release: str, python: str, root: Path) -> Overlay:
    home = root / UNDER / f"keras-{release}"
    site = home / "site"
    stamp = home / STAMP
    kept = read_stamp(stamp, _Stamp, "overlay")
    if kept is not None and kept["python"] == python and site.is_dir():
        return Overlay(release, python, site, tuple(kept["added"]), size(site))
    shutil.rmtree(home, ignore_errors=True)
    files.folder(home)
    with tempfile.TemporaryDirectory(prefix="harness-overlay-") as folder:
        got = _pip("download", "--no-deps", "--dest", folder, f"keras=={release}")
        wheels = sorted(Path(folder).glob("keras-*.whl"))
        if got.returncode != 0 or not wheels:
            shutil.rmtree(home, ignore_errors=True)
            raise ValueError(f"pip cannot fetch keras {release}: {pip_error(got)}")
        added = unmet(requirements(wheels[0]), installed(python))
        done = _pip(
            "install", "--no-deps", "--target", str(site), str(wheels[0]), *added
        )
    if done.returncode != 0:
        shutil.rmtree(home, ignore_errors=True)
        raise ValueError(f"pip cannot install keras {release}: {pip_error(done)}")
    files.write_json(stamp, {"release": release, "python": python, "added": added})
    return Overlay(release, python, site, tuple(added), size(site))


class _Stamp(validated.Schema):
    """What a finished overlay's stamp holds (:func:`_prepare`)."""

    python: str
    added: list[str] = Field(default_factory=list)
