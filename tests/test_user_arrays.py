"""Hostile ``.npz`` files for ``converge --model M --data ARRAYS.npz``
(``zoo.datasets.user_arrays``) and for ``zoo.arrays.load_npz`` (a model
store's ``weights.npz``): members in folders, inflation bombs, a header
that announces a gigabyte, token ids of the wrong kind or range.  Each is
refused in one sentence, before more memory than the accepted arrays need."""

from __future__ import annotations

import io
import struct
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from zoo import datasets
from zoo.arrays import MAX_HEADER, NpzError, digest, load_npz, save_npz
from zoo.datasets import DataError, user_arrays

MODEL = "mine-0123456789ab"


def _spec(tokens: int = 0) -> Any:
    from zoo import user_models

    first = (
        [
            {"kind": "embedding", "input_dim": tokens, "output_dim": 4},
            {"kind": "flatten"},
        ]
        if tokens
        else []
    )
    document = {
        "input_shape": [6],
        "layers": [*first, {"kind": "dense", "units": 3}],
        "workload": {},
    }
    return user_models.spec_from_document(MODEL, document)


def _good(tokens: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    if tokens:
        x_train, x_test = (
            rng.integers(0, tokens, (20, 6)),
            rng.integers(0, tokens, (8, 6)),
        )
    else:
        x_train, x_test = rng.standard_normal((20, 6)), rng.standard_normal((8, 6))
    return {
        "x_train": x_train,
        "y_train": rng.integers(0, 3, 20),
        "x_test": x_test,
        "y_test": rng.integers(0, 3, 8),
    }


def _npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array(out, array, allow_pickle=False)
    return out.getvalue()


def _zip(path: Path, members: list[tuple[str, bytes, int, int, int]]) -> Path:
    """A zip written by hand: each member ``(name, data as stored in the
    archive, method, uncompressed size, crc)``, whatever those say."""
    body, central = b"", b""
    for name, data, method, size, crc in members:
        raw = name.encode()
        head = struct.pack(
            "<IHHHHHIIIHH",
            0x04034B50,
            20,
            0,
            method,
            0,
            33,
            crc,
            len(data),
            size,
            len(raw),
            0,
        )
        central += struct.pack(
            "<IHHHHHHIIIHHHHHII",
            0x02014B50, 20, 20, 0, method, 0, 33, crc, len(data), size,
            len(raw), 0, 0, 0, 0, 0, len(body),
        ) + raw  # fmt: skip
        body += head + raw + data
    end = struct.pack(
        "<IHHHHIIH",
        0x06054B50,
        0,
        0,
        len(members),
        len(members),
        len(central),
        len(body),
        0,
    )
    path.write_bytes(body + central + end)
    return path


def _deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush()


def _members(arrays: dict[str, np.ndarray], prefix: str = "") -> list[Any]:
    return [
        (f"{prefix}{name}.npy", (b := _npy(a)), 0, len(b), zlib.crc32(b))
        for name, a in arrays.items()
    ]


def _peak(load: Any) -> tuple[Any, int]:
    """What ``load()`` returns or raises, and the most bytes it held."""
    tracemalloc.start()
    try:
        try:
            result = load()
        except ValueError as exc:
            result = exc
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# --- members by their exact names --------------------------------------------------


def test_members_in_a_folder_are_refused_naming_where_they_are(tmp_path: Path) -> None:
    path = _zip(tmp_path / "a.npz", _members(_good(), prefix="data/"))
    with pytest.raises(
        DataError, match=r"has no x_train\.npy \(it has data/x_train\.npy"
    ):
        datasets.load(_spec(), path)


def test_other_members_are_never_read(tmp_path: Path) -> None:
    # a folder of copies, a text file and a damaged array: none is one of the four
    junk = [("notes.txt", b"hello", 0, 5, zlib.crc32(b"hello"))]
    junk += [("x_val.npy", b"\x93NUMPY\x02\x00\xff\xff\xff\x7f", 0, 10**9, 0)]
    members = _members(_good()) + _members(_good(), "data/") + junk
    split = datasets.load(_spec(), _zip(tmp_path / "a.npz", members))
    assert split.train_x.shape == (20, 6)


def test_a_member_given_twice_is_refused(tmp_path: Path) -> None:
    members = _members(_good())
    path = _zip(tmp_path / "a.npz", [*members, members[0]])
    with pytest.raises(DataError, match=r"holds x_train\.npy 2 times"):
        datasets.load(_spec(), path)


# --- inflation bombs -----------------------------------------------------------------


def test_the_user_limit_is_one_gib_of_what_the_arrays_become() -> None:
    assert datasets.USER_MAX_BYTES == 2**30 < datasets.MAX_BYTES


def _bomb(path: Path, rows: int) -> Path:
    """x_train of ``rows`` zeros (float64, 6 columns) deflated by repeating
    one flushed segment, so that a few MB stand for gigabytes; the data is
    never read, so its crc is left 0."""
    text = _npy(np.zeros((1, 6)))[10:-48].replace(b"(1, 6)", b"(%d, 6)" % rows)
    header = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    start = packer.compress(header) + packer.flush(zlib.Z_FULL_FLUSH)
    block = packer.compress(bytes(2**20)) + packer.flush(zlib.Z_FULL_FLUSH)
    size = len(header) + rows * 48
    data = start + block * (size // 2**20) + packer.flush()
    rest = [m for m in _members(_good()) if m[0] != "x_train.npy"]
    return _zip(path, [("x_train.npy", data, 8, size, 0), *rest])


def test_an_inflation_bomb_is_refused_by_its_header_before_allocation(
    tmp_path: Path,
) -> None:
    # 3.8 GB of float64 zeros in about 4 MB: 1.8 GiB as float32, over 1 GiB
    path = _bomb(tmp_path / "bomb.npz", 3_800_000_000 // 48)
    assert path.stat().st_size < 8 * 2**20
    error, peak = _peak(lambda: datasets.load(_spec(), path))
    assert isinstance(error, DataError), error
    assert "would take 1.8 GiB in memory, more than the 1.0 GiB" in str(error)
    assert "zoo.datasets.USER_MAX_BYTES" in str(error)
    assert peak < 2**20


def _liar(path: Path, declared: int) -> Path:
    """x_train's true 20 x 6 float64, deflated, said by the zip to unpack
    to ``declared`` bytes."""
    arrays = _good()
    exact = _npy(arrays["x_train"])
    member = ("x_train.npy", _deflate(exact), 8, declared, zlib.crc32(exact))
    return _zip(path, [member, *_members(arrays)[1:]])


def test_a_member_that_unpacks_past_its_header_is_refused(tmp_path: Path) -> None:
    # the header says 20 x 6 float64; the zip says the member unpacks to 3.8 GB
    path = _liar(tmp_path / "lie.npz", 3_800_000_000)
    error, peak = _peak(lambda: datasets.load(_spec(), path))
    assert isinstance(error, DataError), error
    assert "x_train.npy unpacks to 3800000000 bytes, not the 1088 its .npy header" in (
        str(error)
    )
    assert peak < 2**20
    # said to be shorter, it is cut there and fails its crc
    with pytest.raises(DataError, match=r"x_train\.npy cannot be unpacked \(Bad CRC"):
        datasets.load(_spec(), _liar(tmp_path / "short.npz", 1000))


def test_a_member_whose_stream_goes_on_past_its_size_is_refused_unread(
    tmp_path: Path,
) -> None:
    # the deflated stream holds 64 MB past the array its directory declares:
    # refused from the directory (zoo.files.member), none of it inflated
    arrays = _good()
    exact = _npy(arrays["x_train"].astype(np.float32))
    data = _deflate(exact + bytes(64 * 2**20))
    rest = [m for m in _members(arrays) if m[0] != "x_train.npy"]
    member = ("x_train.npy", data, 8, len(exact), zlib.crc32(exact))
    path = _zip(tmp_path / "a.npz", [member, *rest])

    def refused() -> str:
        with pytest.raises(DataError, match="packed bytes, more than its declared"):
            user_arrays.load(path, _spec())
        return ""

    _, peak = _peak(refused)
    assert peak < 8 * 2**20  # never the 64 MB


def test_arrays_are_counted_as_what_they_become(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # uint8 inputs take four times their bytes as float32
    arrays = {**_good(), "x_train": np.zeros((20, 6), np.uint8)}
    path = _zip(tmp_path / "a.npz", _members(arrays))
    monkeypatch.setattr(datasets, "USER_MAX_BYTES", 600)  # the split takes 784 B
    with pytest.raises(DataError, match=r"would take 0\.0 GiB in memory, more than"):
        datasets.load(_spec(), path)
    monkeypatch.setattr(datasets, "USER_MAX_BYTES", 784)
    assert datasets.load(_spec(), path).train_x.dtype == np.float32


@pytest.mark.parametrize(("method", "name"), [(12, "bzip2"), (14, "lzma")])
def test_members_compressed_but_by_deflate_are_refused(
    tmp_path: Path, method: int, name: str
) -> None:
    members = _members(_good())
    first = members[0]
    members[0] = (first[0], first[1], method, first[3], first[4])
    path = _zip(tmp_path / "a.npz", members)
    with pytest.raises(DataError, match=f"compressed with method {method}"):
        datasets.load(_spec(), path)


def test_a_damaged_member_is_one_sentence(tmp_path: Path) -> None:
    members = _members(_good())
    first = members[0]
    members[0] = (*first[:4], first[4] ^ 1)  # a wrong crc
    with pytest.raises(DataError, match=r"x_train\.npy cannot be unpacked \(Bad CRC"):
        datasets.load(_spec(), _zip(tmp_path / "a.npz", members))


# --- headers -------------------------------------------------------------------------


def _header_member(length: int, text: bytes = b"") -> tuple[str, bytes, int, int, int]:
    data = b"\x93NUMPY\x02\x00" + struct.pack("<I", length) + text
    return ("x_train.npy", data, 0, len(data), zlib.crc32(data))


def test_a_gigabyte_header_is_refused_by_its_length_field(tmp_path: Path) -> None:
    rest = [m for m in _members(_good()) if m[0] != "x_train.npy"]
    path = _zip(tmp_path / "a.npz", [_header_member(2**30), *rest])
    error, peak = _peak(lambda: datasets.load(_spec(), path))
    assert isinstance(error, DataError), error
    assert "announces a .npy header of 1073741824 bytes, more than the 65536" in str(
        error
    )
    assert peak < 2**20
    weights = _zip(tmp_path / "weights.npz", [_header_member(2**30)])
    error, peak = _peak(lambda: load_npz(weights))
    assert isinstance(error, NpzError)
    assert "announces a .npy header" in str(error)
    assert peak < 2**20


_SHAPE = "'fortran_order': False, 'shape': (20, 6)}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"{'descr': '<f8', 'fortran_order': False, 'shape': (-2, 6)}", "counts"),
        (b"{'descr': '<f8', 'fortran_order': False}", "not a dict of descr"),
        (b"__import__('os')", "no readable .npy header"),
        (b"(" * 60_000, "no readable .npy header"),
        (b"{'descr': 'O', " + _SHAPE.encode(), "Python objects"),
        (b"{'descr': 'nonsense', " + _SHAPE.encode(), "no NumPy dtype"),
    ],
)
def test_a_bad_header_is_one_sentence(
    tmp_path: Path, text: bytes, message: str
) -> None:
    rest = [m for m in _members(_good()) if m[0] != "x_train.npy"]
    path = _zip(tmp_path / "a.npz", [_header_member(len(text), text), *rest])
    with pytest.raises(DataError, match=message):
        datasets.load(_spec(), path)
    with pytest.raises(NpzError, match=message):
        load_npz(path)


def test_a_header_shorter_than_its_length_field_is_truncated(tmp_path: Path) -> None:
    path = _zip(tmp_path / "a.npz", [_header_member(MAX_HEADER, b"{'descr'")])
    with pytest.raises(NpzError, match="is truncated: 8 of 65536 bytes"):
        load_npz(path)


def test_a_member_that_is_no_array_is_one_sentence(tmp_path: Path) -> None:
    rest = [m for m in _members(_good()) if m[0] != "x_train.npy"]
    path = _zip(
        tmp_path / "a.npz",
        [("x_train.npy", b"hello", 0, 5, zlib.crc32(b"hello")), *rest],
    )
    with pytest.raises(DataError, match=r"x_train\.npy is not a NumPy \.npy array"):
        datasets.load(_spec(), path)


# --- token ids and labels ------------------------------------------------------------


def test_token_ids_stay_integers_through_the_converge_data_path(tmp_path: Path) -> None:
    spec = _spec(tokens=100)
    assert spec.tokens == 100
    arrays = _good(tokens=100)
    arrays["x_test"] = arrays["x_test"].astype(np.uint8)
    np.savez_compressed(tmp_path / "a.npz", **arrays)
    split = datasets.load(spec, tmp_path / "a.npz", datasets.Options(10, 4))
    assert split.train_x.dtype == split.test_x.dtype == np.int32
    assert split.train_y.dtype == split.test_y.dtype == np.int32
    whole = user_arrays.load(tmp_path / "a.npz", spec)
    assert np.array_equal(whole.train_x, arrays["x_train"])
    assert np.array_equal(whole.test_x, arrays["x_test"])
    x, _ = datasets.batched(split.train_x, split.train_y, 5)
    assert x.dtype == datasets.padded(split.test_x, 3).dtype == np.int32


@pytest.mark.parametrize(
    ("x", "message"),
    [
        (
            np.full((20, 6), 3.7),
            "x_train is float64; it must hold integer token ids: "
            f"{MODEL} starts with an embedding of 10 tokens",
        ),
        (np.full((20, 6), 3.0, np.float32), "x_train is float32; it must hold integer"),
        (np.full((20, 6), 10), "token ids outside 0..9, the rows of the embedding"),
        (np.full((20, 6), 10**6), "token ids outside 0..9"),
        (np.full((20, 6), -5), "token ids outside 0..9"),
        (np.full((20, 6), 2**32 + 1, np.int64), "token ids outside 0..9"),  # not 1
        (np.full((20, 6), 2**64 - 1, np.uint64), "token ids outside 0..9"),
    ],
)
def test_bad_token_ids_are_one_sentence(
    tmp_path: Path, x: np.ndarray, message: str
) -> None:
    arrays = {**_good(tokens=10), "x_train": x}
    np.savez(tmp_path / "a.npz", **arrays)
    with pytest.raises(DataError, match=message):
        datasets.load(_spec(tokens=10), tmp_path / "a.npz")


def test_inputs_of_a_model_without_embedding_become_float32(tmp_path: Path) -> None:
    arrays = {**_good(), "x_train": np.arange(120, dtype=np.int64).reshape(20, 6)}
    np.savez(tmp_path / "a.npz", **arrays)
    split = datasets.load(_spec(), tmp_path / "a.npz")
    assert split.train_x.dtype == split.test_x.dtype == np.float32
    np.savez(tmp_path / "b.npz", **{**arrays, "x_test": np.full((8, 6), 1e300)})
    with pytest.raises(DataError, match=r"x_test holds NaN or inf \(or numbers beyond"):
        datasets.load(_spec(), tmp_path / "b.npz")
    np.savez(tmp_path / "c.npz", **{**arrays, "x_test": np.full((8, 6), -np.inf)})
    with pytest.raises(DataError, match="x_test holds NaN or inf"):
        datasets.load(_spec(), tmp_path / "c.npz")


@pytest.mark.parametrize(
    ("y", "message"),
    [
        (np.full(20, 1.0), "y_train is float64; it must hold integer numbers"),
        (np.full(20, 2**32 + 1, np.int64), r"labels outside 0..2"),  # would wrap to 1
        (np.full(20, -1, np.int8), r"labels outside 0..2"),
        (np.array([True] * 20), "y_train is bool"),
    ],
)
def test_bad_labels_are_one_sentence(
    tmp_path: Path, y: np.ndarray, message: str
) -> None:
    np.savez(tmp_path / "a.npz", **{**_good(), "y_train": y})
    with pytest.raises(DataError, match=message):
        datasets.load(_spec(), tmp_path / "a.npz")


def test_fortran_and_big_endian_arrays_read_as_written(tmp_path: Path) -> None:
    arrays = _good()
    written = {
        **arrays,
        "x_train": np.asfortranarray(arrays["x_train"].astype(">f8")),
        "y_train": arrays["y_train"].astype(">i2"),
    }
    np.savez(tmp_path / "a.npz", **written)
    split = user_arrays.load(tmp_path / "a.npz", _spec())
    assert np.array_equal(split.train_x, arrays["x_train"].astype(np.float32))
    assert np.array_equal(split.train_y, arrays["y_train"])


# --- zoo.arrays.load_npz -------------------------------------------------------------


def test_load_npz_reads_what_numpy_reads(tmp_path: Path) -> None:
    arrays = {
        "a/kernel": np.arange(12, dtype=np.float32).reshape(3, 4),
        "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
        "big": np.arange(5, dtype=">i4"),
        "scalar": np.array(2.5),
        "empty": np.zeros((0, 3), np.int16),
        "flags": np.array([True, False]),
        "record": np.array([(1, 2.0)], dtype=[("a", "<i4"), ("b", "<f8")]),
    }
    np.savez_compressed(tmp_path / "c.npz", **arrays)
    save_npz(tmp_path / "s.npz", arrays)
    for file in ("c.npz", "s.npz"):
        loaded = load_npz(tmp_path / file)
        with np.load(tmp_path / file) as expected:
            assert sorted(loaded) == sorted(expected.files)
            for name in expected.files:
                assert loaded[name].dtype == expected[name].dtype, name
                assert np.array_equal(loaded[name], expected[name]), name
                assert (
                    loaded[name].flags.f_contiguous == expected[name].flags.f_contiguous
                )
        assert digest(loaded) == digest(arrays)


def test_load_npz_refuses_a_lying_member_and_a_foreign_one(tmp_path: Path) -> None:
    path = _liar(tmp_path / "lie.npz", 3_800_000_000)
    error, peak = _peak(lambda: load_npz(path))
    assert isinstance(error, NpzError)
    assert "unpacks to 3800000000 bytes" in str(error)
    assert peak < 2**20
    text = _zip(tmp_path / "t.npz", [("notes.txt", b"hi", 0, 2, zlib.crc32(b"hi"))])
    with pytest.raises(NpzError, match=r"notes\.txt is not a \.npy array"):
        load_npz(text)
    (tmp_path / "x.npz").write_text("text")
    with pytest.raises(NpzError, match=r"not an \.npz file"):
        load_npz(tmp_path / "x.npz")
    twice = _zip(tmp_path / "twice.npz", _members({"a": np.zeros(2)}) * 2)
    with pytest.raises(NpzError, match=r"a\.npy is in the archive twice"):
        load_npz(twice)
