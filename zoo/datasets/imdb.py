"""IMDB sentiment from the ``aclImdb`` folder of text reviews.

Expected: ``aclImdb/{train,test}/{pos,neg}/*.txt`` (the archive
``aclImdb_v1.tar.gz`` unpacked; ``unsup`` and the other files are ignored),
UTF-8 text, one review per file.  Labels: ``neg`` 0, ``pos`` 1.  The real
splits hold 12,500 reviews of each kind; here each of the four folders must
hold at least one review and ``pos`` as many as ``neg`` in each split, so a
partial extraction (which stops in the middle of a folder) is refused.

From text to the LSTM's input, deterministically:

1. **Tokens**: lower case, ``<br />`` removed, then runs of letters and
   digits, with an apostrophe inside a word kept (``don't``).  Files are read
   in name order.
2. **Vocabulary**: the ``vocabulary`` most frequent training tokens (ties by
   alphabetical order) get ids 2, 3, ... in that order; 0 pads, 1 stands for
   any other token.
3. **Length**: each review keeps its last ``length`` tokens and is padded
   with 0 in front (Keras' ``pad_sequences`` defaults), so the LSTM's final
   state has just read the review's end.
4. **Features**: each id becomes 50 numbers from a fixed table (padding:
   zeros); a model that starts with an embedding (the transformer) takes
   the ids themselves instead (``tokens``), its vocabulary the embedding's
   rows less the two reserved ids.  By default the table is seeded:
   ``rng(seed).standard_normal`` scaled by ``1/sqrt(50)``, so a feature
   vector has about unit length.  With a
   GloVe file (``glove.6B.50d.txt``: a word and 50 numbers per line) the
   words it has take its vectors, the others keep their seeded ones.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from zoo import files
from zoo.datasets import DataError, Split, orders, regular_file, within_limit

FEATURES = 50
PAD, UNKNOWN = 0, 1
# The most text one folder of reviews may hold: tokens take some ten times
# their text in memory.
MAX_TEXT_BYTES = 2**28
# The largest GloVe file read (glove.6B.50d.txt is 171 MB).
MAX_GLOVE_BYTES = 2**30
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")


def tokens(text: str) -> list[str]:
    """The review's tokens (rule 1 above)."""
    return _TOKEN.findall(text.lower().replace("<br />", " "))


def reviews(where: Path, part: str) -> tuple[list[list[str]], np.ndarray]:
    """Every review of ``where/part`` as tokens, ``neg`` then ``pos``, each
    in file-name order, and their labels; the files' sizes are checked
    before any is read (:data:`MAX_TEXT_BYTES`)."""
    texts, labels = [], []
    counts = {}
    for label, kind in enumerate(("neg", "pos")):
        folder = where / part / kind
        if not folder.is_dir():
            raise DataError(
                f"{folder} is missing: IMDB needs aclImdb/train and aclImdb/test, "
                f"each with pos/ and neg/ folders of .txt reviews"
            )
        reviews = [
            regular_file(f, "a review as UTF-8 text")
            for f in sorted(folder.glob("*.txt"))
        ]
        text_bytes = sum(f.stat().st_size for f in reviews)
        if text_bytes > MAX_TEXT_BYTES:
            raise DataError(
                f"the reviews in {folder} are {text_bytes / 2**20:.0f} MiB of text, "
                f"more than the {MAX_TEXT_BYTES // 2**20} MiB read here "
                f"(imdb.MAX_TEXT_BYTES; IMDB's own are 17 MiB a folder)"
            )
        counts[kind] = len(reviews)
        for file in reviews:
            try:
                texts.append(tokens(files.read_text(file, MAX_TEXT_BYTES, follow=True)))
            except OSError as exc:  # not UTF-8 (zoo.files.Refused), unreadable
                raise DataError(str(exc)) from exc
        labels += [label] * len(reviews)
    if not counts["neg"] or counts["neg"] != counts["pos"]:
        raise DataError(
            f"{where / part} holds {counts['pos']} positive and {counts['neg']} "
            f"negative reviews; IMDB's splits hold as many of each (12,500), so "
            f"the extraction is incomplete"
        )
    return texts, np.asarray(labels, np.int32)


def build_vocabulary(texts: Iterable[list[str]], size: int) -> dict[str, int]:
    """The ``size`` most frequent tokens (ties alphabetically), to ids from 2."""
    counts = collections.Counter(token for text in texts for token in text)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:size]
    return {word: i for i, (word, _) in enumerate(ranked, start=2)}


def sequences(texts: list[list[str]], words: dict[str, int], length: int) -> np.ndarray:
    """Ids ``(N, length)``: each review's last ``length`` tokens, padded in
    front with 0."""
    out = np.full((len(texts), length), PAD, np.int32)
    for row, text in zip(out, texts, strict=True):
        ids = [words.get(token, UNKNOWN) for token in text[-length:]]
        if ids:
            row[length - len(ids) :] = ids
    return out


def table(words: dict[str, int], seed: int, glove: Path | None = None) -> np.ndarray:
    """The feature of every id, ``(len(words) + 2, 50)`` float32 (rule 4)."""
    within_limit(
        (len(words) + 2) * FEATURES * 8, f"a feature table of {len(words)} words"
    )
    rng = np.random.default_rng(seed)
    drawn = rng.standard_normal((len(words) + 2, FEATURES)) / np.sqrt(FEATURES)
    features: np.ndarray = drawn.astype(np.float32)
    features[PAD] = 0.0
    if glove is not None:
        for word, vector in read_glove(glove, words):
            features[words[word]] = vector
    return features


def read_glove(path: Path, wanted: dict[str, int]) -> Iterable[tuple[str, np.ndarray]]:
    """The vectors of ``path`` (``word`` and 50 numbers per line) for the
    words in ``wanted``; a line of another shape is refused, naming it."""
    path = regular_file(Path(path), "a GloVe 50-d text file (glove.6B.50d.txt)")
    found = 0
    with files.opened(path, MAX_GLOVE_BYTES, follow=True) as lines:
        for number, raw in enumerate(lines, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(
                    f"{path} line {number} is not UTF-8 text ({exc.reason}): a GloVe "
                    f"50-d file (glove.6B.50d.txt) was expected"
                ) from exc
            fields = line.rstrip("\n").rstrip("\r").rstrip(" ").split(" ")
            try:
                if len(fields) != FEATURES + 1:
                    raise ValueError(f"{len(fields) - 1} numbers")
                with np.errstate(over="ignore"):
                    vector = np.asarray(fields[1:], np.float64).astype(np.float32)
                if not np.isfinite(vector).all():
                    raise ValueError("a NaN, an inf or a number beyond float32")
            except ValueError as exc:
                raise DataError(
                    f"{path} line {number} is not a word and {FEATURES} finite "
                    f"numbers ({exc}): a GloVe 50-d file (glove.6B.50d.txt) was "
                    f"expected"
                ) from exc
            found += 1
            if fields[0] in wanted:
                yield fields[0], vector
    if not found:
        raise DataError(f"the GloVe file {path} is empty")


def load(
    where: Path,
    *,
    length: int,
    vocabulary: int,
    glove: Path | None,
    seed: int,
    samples: tuple[int | None, int | None] = (None, None),
    tokens: bool = False,
) -> Split:
    """Both splits of ``where`` as features ``(N, length, 50)``, or with
    ``tokens`` as int32 ids ``(N, length)``: the ``samples`` (training,
    test; None: all) that ``zoo.datasets.orders`` keeps, in its order, each
    built only once it is kept and its size checked
    (``zoo.datasets.MAX_BYTES``)."""
    if length < 1 or vocabulary < 1:
        raise DataError("IMDB needs a sequence length and a vocabulary of at least 1")
    flat = not (where / "train").is_dir() and (where.parent / "train").is_dir()
    hint = f" (train/ is in {where.parent}: IMDB's folders go in its aclImdb/ folder)"
    if not where.is_dir():
        raise DataError(
            f"{where} is missing: put the unpacked aclImdb folder (aclImdb_v1.tar.gz) "
            f"in the data folder" + (hint if flat else "")
        )
    if flat:
        raise DataError(f"{where / 'train'} is missing{hint}")
    train_texts, train_y = reviews(where, "train")
    test_texts, test_y = reviews(where, "test")
    source = f"IMDB reviews in {where}"
    train_order, test_order = orders((len(train_y), len(test_y)), samples, seed, source)
    width = 1 if tokens else FEATURES
    for name, order in (("training", train_order), ("test", test_order)):
        within_limit(
            len(order) * length * width * 4,
            f"IMDB's {name} features ({len(order)} reviews x {length} tokens x "
            f"{width} 4-byte values; lower the samples or sequence_length)",
        )
    words = build_vocabulary(train_texts, vocabulary)
    if tokens:
        return Split(
            sequences([train_texts[i] for i in train_order], words, length),
            train_y[train_order],
            sequences([test_texts[i] for i in test_order], words, length),
            test_y[test_order],
            source=f"{source} (token ids: {len(words)} words, last {length} tokens)",
        )
    features = table(words, seed, glove)
    how = f"{len(words)} words, last {length} tokens, " + (
        f"GloVe {Path(glove).name}" if glove else f"seeded features (seed {seed})"
    )
    return Split(
        features[sequences([train_texts[i] for i in train_order], words, length)],
        train_y[train_order],
        features[sequences([test_texts[i] for i in test_order], words, length)],
        test_y[test_order],
        source=f"{source} ({how})",
    )
