"""The door for files (``zoo.files``): each hostile input refused in one
sentence before a byte is read or a byte is written outside its folder."""

from __future__ import annotations

import os
import struct
import zipfile
from pathlib import Path

import pytest

from tests.helpers import within
from zoo import files


def test_only_a_regular_file_within_its_limit_is_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    real = tmp_path / "real.json"
    real.write_text('{"a": 1}')
    link = tmp_path / "link.json"
    link.symlink_to(real)
    with within(10):
        with pytest.raises(files.Refused, match="is a FIFO, not a regular file"):
            files.read_json(fifo)
        with pytest.raises(files.Refused, match="is a symbolic link: it is not"):
            files.read_json(zero)
        with pytest.raises(files.Refused, match="is a character device"):
            files.read_bytes(zero, follow=True)  # a path the user named
        with pytest.raises(files.Refused, match="is a folder"):
            files.read_text(tmp_path)
        with pytest.raises(files.Refused, match="is a symbolic link"):
            files.read_object(link)
        assert files.read_object(link, follow=True) == {"a": 1}
        with pytest.raises(files.Refused, match="8 bytes, more than the 4"):
            files.read_bytes(real, 4)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"\xff\xfe", "is not UTF-8 text"),
        (b"{", "is not JSON that can be read"),
        (b"[" * 100_000, "nests too deeply|is not JSON"),
        (b"9" * 5000, "is not JSON that can be read"),
        (b"[1, 2]", "not an object"),
    ],
)
def test_what_is_not_json_is_refused_in_one_sentence(
    tmp_path: Path, content: bytes, said: str
) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(content)
    with pytest.raises(files.Refused, match=said) as refused:
        files.read_object(path)
    assert str(path) in str(refused.value)
    assert "\n" not in str(refused.value)


def test_toml_that_is_not_toml_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "x.toml"
    path.write_text("[a\n")
    with pytest.raises(files.Refused, match=r"x\.toml is not TOML"):
        files.read_toml(path)


@pytest.mark.parametrize(
    "name", ["", ".", "..", "../x", "a/b", "/etc", "a\0b", "x" * 300]
)
def test_a_name_from_data_is_one_plain_name_or_refused(
    tmp_path: Path, name: str
) -> None:
    with pytest.raises(files.Refused, match="not one plain file name"):
        files.inside(tmp_path, name, "a finding's id")
    assert files.inside(tmp_path, "0a1b2c.md") == tmp_path / "0a1b2c.md"
    assert "/" not in files.file_name(name)
    assert files.file_name(name) not in ("", ".", "..")


def test_a_write_replaces_a_planted_link_and_never_follows_it(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("before\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").symlink_to(outside)
    files.write_text(out / "report.md", "after\n")
    assert outside.read_text() == "before\n"
    assert not (out / "report.md").is_symlink()
    assert (out / "report.md").read_text() == "after\n"
    (out / "model.keras").symlink_to(outside)
    files.write_with(out / "model.keras", lambda p: p.write_bytes(b"saved"))
    assert outside.read_text() == "before\n"
    assert (out / "model.keras").read_bytes() == b"saved"
    assert sorted(p.name for p in out.iterdir()) == ["model.keras", "report.md"]


def test_a_write_that_fails_leaves_the_target_and_no_temporary(tmp_path: Path) -> None:
    target = files.write_text(tmp_path / "x.md", "kept\n")

    def fails(path: Path) -> None:
        path.write_bytes(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        files.write_with(target, fails)
    assert target.read_text() == "kept\n"
    assert [p.name for p in tmp_path.iterdir()] == ["x.md"]


def test_a_folder_is_never_a_link_or_a_file(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "out").symlink_to(elsewhere)
    with pytest.raises(files.Refused, match="is a symbolic link, not a folder"):
        files.folder(tmp_path / "out")
    assert files.folder(tmp_path / "out", follow=True) == tmp_path / "out"  # named
    (tmp_path / "file").write_text("")
    with pytest.raises(files.Refused, match=r"a part of it is a file|not a folder"):
        files.folder(tmp_path / "file" / "sub")
    assert files.folder(tmp_path / "a" / "b").is_dir()


def _lying_archive(path: Path, member: str, data: bytes, declared: int) -> Path:
    """An archive whose ``member`` inflates to ``data`` while its central
    directory declares ``declared`` bytes (a zip bomb's lie)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(member, data)
        archive.writestr("junk", b"0" * 100_000)
    raw = bytearray(path.read_bytes())
    at = raw.find(b"PK\x01\x02")
    while at != -1:
        length = struct.unpack_from("<H", raw, at + 28)[0]
        if raw[at + 46 : at + 46 + length] == member.encode():
            struct.pack_into("<I", raw, at + 24, declared)
        at = raw.find(b"PK\x01\x02", at + 4)
    path.write_bytes(bytes(raw))
    return path


def test_a_member_is_read_within_its_limit_whatever_it_declares(tmp_path: Path) -> None:
    honest = _lying_archive(tmp_path / "a.zip", "m", b"x" * 5000, 5000)
    with files.open_zip(honest) as archive:
        assert files.member_bytes(archive, "m", 5000, "a: m") == b"x" * 5000
        with pytest.raises(files.Refused, match="5,000 bytes, more than the 4,999"):
            files.member_bytes(archive, "m", 4999, "a: m")
        with pytest.raises(files.Refused, match="is not in the archive"):
            files.member_bytes(archive, "missing", 10, "a: missing")
    lying = _lying_archive(tmp_path / "b.zip", "m", os.urandom(5000), 300)
    with (
        files.open_zip(lying) as archive,
        pytest.raises(files.Refused, match="declared 300 bytes can take"),
    ):
        files.member_bytes(archive, "m", 1000, "b: m")  # never 5000 bytes
    (tmp_path / "no.zip").write_bytes(b"not a zip")
    with (
        pytest.raises(files.Refused, match="is not a zip archive"),
        files.open_zip(tmp_path / "no.zip"),
    ):
        pass


def test_a_copy_holds_exactly_what_was_checked(tmp_path: Path) -> None:
    source = _lying_archive(tmp_path / "in.keras", "model.weights.h5", b"w" * 64, 64)
    with files.open_zip(source) as archive:
        copy = files.zip_copy(
            tmp_path / "copy.keras",
            archive,
            {"model.weights.h5": 64, "metadata.json": 10},
            {"config.json": b"{}"},
            source,
        )
        with pytest.raises(files.Refused, match="more than the 63"):
            files.zip_copy(
                tmp_path / "small.keras", archive, {"model.weights.h5": 63}, {}, source
            )
    assert not (tmp_path / "small.keras").exists()
    with zipfile.ZipFile(copy) as made:
        sizes = {info.filename: info.file_size for info in made.infolist()}
    assert sizes == {"config.json": 2, "model.weights.h5": 64}  # no junk copied
