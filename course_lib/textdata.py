"""Text for language models, offline: a corpus, a byte tokenizer, next-token windows.

`text_corpus` reads an offline corpus (by default the running Python's own standard library,
~31 MB), split into train and val by a stable hash of each file's path, as byte tokens;
`lm_windows` cuts it into next-token windows for :class:`course_lib.data.TensorLoader`;
`unigram_loss` is the loss of a model that knows only how often each token occurs.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from course_lib.data import DatasetMissing


class CorpusMissing(DatasetMissing):
    """A text path that does not exist, or holds no text."""


def _ids(data: bytes) -> torch.Tensor:
    """int64 ids (n,) of n bytes: one uint8 view of a copy, widened once (8 bytes a token)."""
    if not data:
        return torch.zeros(0, dtype=torch.long)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).long()


class ByteTokenizer:
    """UTF-8 bytes as tokens: vocabulary of 256, nothing to train, any text round-trips."""

    name = "bytes"
    vocab_size = 256

    def encode(self, text: str) -> torch.Tensor:
        """int64 ids (n,) in 0..255, one per UTF-8 byte of `text` (n >= number of characters)."""
        try:
            return _ids(text.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise ValueError(f"Character {text[exc.start]!r} at position {exc.start} has no UTF-8 "
                             f"encoding (a lone surrogate): remove it before encoding.") from None

    def decode(self, ids: torch.Tensor | Sequence[int]) -> str:
        """The text of ids (n,) in 0..255; bytes that are not valid UTF-8 become U+FFFD, no error."""
        if isinstance(ids, torch.Tensor):
            if ids.dim() != 1:
                raise ValueError(f"Decode one sequence of ids (n,) at a time, "
                                 f"got shape {tuple(ids.shape)}.")
            ids = ids.tolist()
        else:
            ids = list(ids)  # a numpy array would otherwise give bytes() its raw buffer
        try:
            data = bytes(ids)
        except (TypeError, ValueError):
            bad = next((i for i in ids if not isinstance(i, int) or not 0 <= i < 256), ids)
            raise ValueError(f"Byte ids are integers in 0..255, got {bad!r}.") from None
        return data.decode("utf-8", errors="replace")


def _amount(n_tokens: int, tokenizer: Any) -> str:
    """A size for describe(): bytes in B / kB / MB for byte tokens, else a token count."""
    if not isinstance(tokenizer, ByteTokenizer):
        return f"{n_tokens:,} tokens"
    if n_tokens >= 1_000_000:
        return f"{n_tokens / 1e6:.1f} MB"
    return f"{n_tokens / 1e3:.1f} kB" if n_tokens >= 1_000 else f"{n_tokens} B"


@dataclass
class Corpus:
    """Token ids of a train and a val text, the files they came from, and their tokenizer."""

    name: str  # e.g. "Python 3.11.7 standard library", or the path given
    train: torch.Tensor  # int64 (n_train,) token ids
    val: torch.Tensor  # int64 (n_val,)
    train_files: list[str]  # relative paths, sorted (a single file: [its name])
    val_files: list[str]
    tokenizer: ByteTokenizer

    def describe(self) -> str:
        """One line: name, files and size of train / val, tokenizer."""
        def side(files: list[str], tokens: torch.Tensor) -> str:
            n = len(files)
            return f"{n:,} file{'' if n == 1 else 's'} ({_amount(len(tokens), self.tokenizer)})"

        is_bytes = isinstance(self.tokenizer, ByteTokenizer)
        kind = "byte tokens" if is_bytes else f"{self.tokenizer.name} tokens"
        return (f"{self.name}: {side(self.train_files, self.train)} train, "
                f"{side(self.val_files, self.val)} val, {kind}")


def _walk(root: Path, skip_dir: Callable[[str], bool], keep_file: Callable[[str], bool]) -> list[str]:
    """Sorted relative POSIX paths of the regular files under `root` that `keep_file(name)`
    accepts, not descending into folders where `skip_dir(name)` is true, nor symlinked ones."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not skip_dir(d)]
        for f in files:
            full = Path(folder) / f
            if keep_file(f) and full.is_file():
                found.append(full.relative_to(root).as_posix())
    return sorted(found)


def stdlib_files(root: str | Path | None = None) -> list[str]:
    """Relative paths of the standard library's .py files, sorted: the running interpreter's
    `sysconfig.get_paths()["stdlib"]` (or `root`), without site-packages, dist-packages
    and __pycache__."""
    root = Path(root if root is not None else sysconfig.get_paths()["stdlib"])
    files = _walk(root, lambda d: d in ("site-packages", "dist-packages", "__pycache__"),
                  lambda f: f.endswith(".py")) if root.is_dir() else []
    if not files:
        raise CorpusMissing(f"No Python standard library (.py files) at {root}: "
                            f"give text_corpus a text file or a folder of text files instead.")
    return files


def _visible(name: str) -> bool:
    """Not hidden (no leading dot) and not a bytecode cache."""
    return not name.startswith(".") and name != "__pycache__"


def _read_texts(root: Path, files: list[str]) -> dict[str, bytes]:
    """The bytes of each file that reads, decodes as UTF-8 and holds more than whitespace."""
    texts = {}
    for rel in files:
        try:
            data = (root / rel).read_bytes()
            data.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # unreadable or not UTF-8 text: not part of the corpus
        if data.strip():
            texts[rel] = data
    return texts


def _file_hash(rel: str) -> int:
    """A 64-bit hash of a relative path, the same on every machine and Python version."""
    return int.from_bytes(hashlib.blake2b(rel.encode(), digest_size=8).digest(), "little")


def _spread(texts: dict[str, bytes], val: set[str], order: list[str], val_percent: int,
            max_bytes: int) -> list[str]:
    """Files kept under a budget of `max_bytes`: walking `order` (hash order, so a spread
    over the whole tree), keep a file while its split stays within its share; the first
    file of each split always stays."""
    share = {False: max_bytes * (100 - val_percent) / 100, True: max_bytes * val_percent / 100}
    used = {False: 0, True: 0}  # bytes, each file counted with its "\n" separator
    kept = []
    for rel in order:
        side, size = rel in val, len(texts[rel]) + 1
        if used[side] == 0 or used[side] + size <= share[side]:
            kept.append(rel)
            used[side] += size
    return kept


def _encode(data: bytes, tokenizer: Any) -> torch.Tensor:
    """int64 ids (n,) of UTF-8 `data`: straight from the bytes for byte tokens."""
    return _ids(data) if isinstance(tokenizer, ByteTokenizer) else tokenizer.encode(data.decode("utf-8"))


def _by_file(name: str, texts: dict[str, bytes], val_percent: int, max_bytes: int | None,
             tokenizer: Any) -> Corpus:
    """Split >= 2 files by the hash of their paths, keep a spread under `max_bytes`, and
    concatenate each split in sorted path order, joined by newlines."""
    hashes = {rel: _file_hash(rel) for rel in texts}
    order = sorted(texts, key=lambda rel: (hashes[rel], rel))
    val = {rel for rel in texts if hashes[rel] % 100 < val_percent}
    if len(val) in (0, len(texts)):  # one side empty: the smallest hash moves across
        val ^= {order[0]}
    kept = order if max_bytes is None else _spread(texts, val, order, val_percent, max_bytes)
    train_files = sorted(rel for rel in kept if rel not in val)
    val_files = sorted(rel for rel in kept if rel in val)
    return Corpus(name, _encode(b"\n".join(texts[r] for r in train_files), tokenizer),
                  _encode(b"\n".join(texts[r] for r in val_files), tokenizer),
                  train_files, val_files, tokenizer)


def _split_text(text: str, val_percent: int) -> tuple[str, str]:
    """Cut one text so that about its last val_percent % of characters are val, at the start
    of a line when one lies within half the val share of that point; both sides non-empty."""
    n = len(text)
    target = min(max(n * (100 - val_percent) // 100, 1), n - 1)  # characters in train
    slack = max(1, n * val_percent // 200)
    cuts = [text.rfind("\n", 0, target) + 1, text.find("\n", target, n - 1) + 1]  # 0: none there
    cuts = [c for c in cuts if 1 <= c <= n - 1 and abs(c - target) <= slack]
    cut = min(cuts, key=lambda c: abs(c - target)) if cuts else target
    return text[:cut], text[cut:]


def _single(name: str, file_name: str, data: bytes, val_percent: int, max_bytes: int | None,
            tokenizer: Any) -> Corpus:
    """One text: its last val_percent % (cut at a line start) is val."""
    if max_bytes is not None:
        data = data[:max_bytes]  # a byte budget; a character cut in half is dropped below
    text = data.decode("utf-8", errors="ignore")
    if len(text.strip()) < 2:
        raise CorpusMissing(f"{name} holds too little text to split into train and val "
                            f"({len(text)} characters): give a longer text.")
    train, val = _split_text(text, val_percent)
    return Corpus(name, _encode(train.encode("utf-8"), tokenizer),
                  _encode(val.encode("utf-8"), tokenizer), [file_name], [file_name], tokenizer)


def text_corpus(path: str | Path | None = None, *, val_percent: int = 10,
                max_bytes: int | None = None, tokenizer: ByteTokenizer | None = None) -> Corpus:
    """A train / val corpus of token ids, read offline.

    path None: the running Python's standard library .py sources (`stdlib_files`). A folder:
    every UTF-8 text file under it (sorted relative paths; hidden files and folders,
    __pycache__, files that do not decode and whitespace-only files skipped). A file: that text.

    Several files split by file: a file is val when the blake2b hash of its relative path,
    mod 100, is below `val_percent`, so it keeps its side on every machine; each split is its
    files concatenated in sorted path order, joined by newlines. One file: its last
    `val_percent` % of characters are val, cut at the start of a line.

    `max_bytes` caps the size for small profiles: a spread of files picked in hash order, each
    split within its share (at least one file each); a single text is cut to max_bytes bytes.
    Memory: int64 ids, 8 bytes a token (the stdlib: ~31 MB of text, ~250 MB of ids).
    """
    if not 1 <= val_percent <= 50:
        raise ValueError(f"val_percent is the share of text held out, 1..50, got {val_percent}.")
    if max_bytes is not None and max_bytes < 1:
        raise ValueError(f"max_bytes caps the corpus size and must be >= 1, got {max_bytes}.")
    tokenizer = tokenizer if tokenizer is not None else ByteTokenizer()
    if path is None:
        root = Path(sysconfig.get_paths()["stdlib"])
        texts = _read_texts(root, stdlib_files(root))
        if not texts:
            raise CorpusMissing(f"No UTF-8 .py file in the standard library at {root}: "
                                f"give text_corpus a text file or a folder of text files instead.")
        name = f"Python {platform.python_version()} standard library"
    elif Path(path).is_dir():
        root = Path(path)
        texts = _read_texts(root, _walk(root, lambda d: not _visible(d), _visible))
        if not texts:
            raise CorpusMissing(f"No UTF-8 text file in {root}: "
                                f"put text files (.txt, .md, .py, ...) there.")
        name = str(path)
    elif Path(path).is_file():
        data = Path(path).read_bytes()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorpusMissing(f"{path} is not UTF-8 text (byte {exc.start} does not decode): "
                                f"give a UTF-8 text file.") from None
        if not data.strip():
            raise CorpusMissing(f"{path} holds no text: give a text file that is not empty.")
        return _single(str(path), Path(path).name, data, val_percent, max_bytes, tokenizer)
    else:
        raise CorpusMissing(f"No text at {path}: give a text file or a folder of text files.")
    if len(texts) == 1:
        (rel, data), = texts.items()
        return _single(name, rel, data, val_percent, max_bytes, tokenizer)
    return _by_file(name, texts, val_percent, max_bytes, tokenizer)


def lm_windows(tokens: torch.Tensor, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Non-overlapping next-token windows as views, no copy: x (N, block) and y (N, block),
    y[i] = x[i] shifted by one token; N = (len(tokens) - 1) // block. Feed them to
    TensorLoader(x, y, batch_size) for a resumable, seeded order.

    The views share memory with `tokens`: writing into x or y writes into tokens.
    """
    if block < 1:
        raise ValueError(f"block is the window length in tokens and must be >= 1, got {block}.")
    if tokens.dim() != 1 or not tokens.is_contiguous():
        raise ValueError(f"lm_windows needs 1-D contiguous token ids, got shape {tuple(tokens.shape)}"
                         f"{'' if tokens.is_contiguous() else ' (not contiguous: call .contiguous())'}.")
    n = (len(tokens) - 1) // block
    if n < 1:
        raise ValueError(f"One window of block {block} needs at least {block + 1} tokens, "
                         f"got {len(tokens)}.")
    x = tokens.as_strided((n, block), (block, 1))  # x[i] = tokens[i*block : (i+1)*block]
    y = tokens[1:].as_strided((n, block), (block, 1))  # the same windows one token later
    return x, y


def unigram_loss(train: torch.Tensor, val: torch.Tensor, vocab_size: int) -> float:
    """Cross-entropy in nats/token of `val` under the token frequencies of `train` (add-one
    smoothing): the loss of a model that ignores context, the baseline a language model must beat."""
    for label, ids in (("train", train), ("val", val)):
        if ids.numel() and not (0 <= int(ids.min()) and int(ids.max()) < vocab_size):
            raise ValueError(f"{label} token ids must lie in 0..{vocab_size - 1} "
                             f"(vocab_size {vocab_size}), got {int(ids.min())}..{int(ids.max())}.")
    if val.numel() == 0:
        raise ValueError("val holds no tokens: the loss of an empty text is undefined.")
    counts = torch.bincount(train.flatten().long(), minlength=vocab_size).double() + 1  # (V,)
    log_p = counts.log() - counts.sum().log()  # (V,) log-probability of each token
    seen = torch.bincount(val.flatten().long(), minlength=vocab_size).double()  # (V,)
    return float(-(seen * log_p).sum() / seen.sum())
