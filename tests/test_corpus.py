"""course_lib.data, text part: the offline corpus, byte tokens, next-token windows, unigram baseline."""

from __future__ import annotations

import hashlib
import math
import statistics
import sysconfig
from pathlib import Path

import pytest
import torch

from course_lib import data, textdata

BUDGET = 300_000  # bytes: a small stdlib corpus, fast enough for every test run


def path_hash(rel: str) -> int:
    """The split rule, written out independently of textdata.py."""
    return int.from_bytes(hashlib.blake2b(rel.encode(), digest_size=8).digest(), "little")


def write_tree(root: Path, n: int = 30) -> dict[str, str]:
    """n small UTF-8 files in three sub-folders; returns {relative path: text}."""
    texts = {}
    for i in range(n):
        rel = f"pkg{i % 3}/mod{i:02d}.txt"
        texts[rel] = "".join(f"line {j} of file {i}, café\n" for j in range(i + 1))
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(texts[rel], encoding="utf-8")
    return texts


def joined(texts: dict[str, str], files: list[str]) -> str:
    return "\n".join(texts[f] for f in files)


@pytest.fixture(scope="module")
def small_stdlib() -> textdata.Corpus:
    return textdata.text_corpus(max_bytes=BUDGET)


def stdlib_texts() -> tuple[Path, list[str], dict[str, int]]:
    """The stdlib root, every file that textdata.py could use (UTF-8, not blank), and their sizes."""
    root = Path(sysconfig.get_paths()["stdlib"])
    sizes = {}
    for rel in textdata.stdlib_files():
        raw = (root / rel).read_bytes()
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if raw.strip():
            sizes[rel] = len(raw)
    return root, sorted(sizes), sizes


# ---- the standard library as a corpus ---------------------------------------------------

def test_stdlib_files_are_sorted_python_sources_without_site_packages():
    files = textdata.stdlib_files()
    assert len(files) > 100 and files == sorted(files)
    assert all(f.endswith(".py") for f in files)
    assert not any(part in ("site-packages", "dist-packages", "__pycache__")
                   for f in files for part in Path(f).parts)
    assert "os.py" in files and not any(Path(f).is_absolute() for f in files)


def test_stdlib_corpus_is_deterministic(small_stdlib):
    again = textdata.text_corpus(max_bytes=BUDGET)
    assert torch.equal(small_stdlib.train, again.train) and torch.equal(small_stdlib.val, again.val)
    assert small_stdlib.train_files == again.train_files and small_stdlib.val_files == again.val_files
    assert small_stdlib.train.dtype == small_stdlib.val.dtype == torch.int64
    assert small_stdlib.train.dim() == 1 and len(small_stdlib.val) > 0
    assert small_stdlib.tokenizer.vocab_size == 256


def test_stdlib_split_follows_the_path_hash_and_files_are_disjoint(small_stdlib):
    c = small_stdlib
    assert not set(c.train_files) & set(c.val_files)
    assert c.train_files == sorted(c.train_files) and c.val_files == sorted(c.val_files)
    assert all(path_hash(f) % 100 < 10 for f in c.val_files)
    assert all(path_hash(f) % 100 >= 10 for f in c.train_files)


def test_stdlib_split_is_by_file(small_stdlib):
    root = Path(sysconfig.get_paths()["stdlib"])
    for files, tokens in ((small_stdlib.val_files, small_stdlib.val),
                          (small_stdlib.train_files, small_stdlib.train)):
        expected = b"\n".join((root / f).read_bytes() for f in files)
        assert bytes(tokens.tolist()) == expected


def test_max_bytes_is_respected_and_is_a_spread(small_stdlib):
    _, usable, sizes = stdlib_texts()
    c = small_stdlib
    for files, tokens, share in ((c.train_files, c.train, BUDGET * 0.9),
                                 (c.val_files, c.val, BUDGET * 0.1)):
        assert len(tokens) <= share + max(sizes[f] for f in files)  # within one file's slack
        assert len(tokens) >= share / 2  # and the budget is actually used
    kept = c.train_files + c.val_files
    rank = {f: i / len(usable) for i, f in enumerate(usable)}  # alphabetical, 0..1
    assert 0.25 < statistics.median(rank[f] for f in kept) < 0.75  # a spread, not the first files
    by_hash = sorted(usable, key=path_hash)
    for files, is_val in ((c.train_files, False), (c.val_files, True)):  # the walk starts there
        first = next(f for f in by_hash if (path_hash(f) % 100 < 10) == is_val)
        assert min(files, key=path_hash) == first


def test_a_tiny_budget_keeps_the_first_file_of_each_split_in_hash_order(tmp_path):
    texts = write_tree(tmp_path)
    c = textdata.text_corpus(tmp_path, val_percent=30, max_bytes=1)
    for files, is_val in ((c.train_files, False), (c.val_files, True)):
        side = [f for f in texts if (path_hash(f) % 100 < 30) == is_val]
        assert files == [min(side, key=path_hash)]


def test_describe_is_one_line_with_counts(small_stdlib):
    line = small_stdlib.describe()
    assert "\n" not in line and "standard library" in line and "byte tokens" in line
    for files in (small_stdlib.train_files, small_stdlib.val_files):
        assert f"{len(files)} files" in line


# ---- folders and single files -------------------------------------------------------------

def test_folder_split_by_file_in_sorted_order(tmp_path):
    texts = write_tree(tmp_path)
    c = textdata.text_corpus(tmp_path, val_percent=30)
    assert sorted(c.train_files + c.val_files) == sorted(texts)
    assert c.train_files and c.val_files and not set(c.train_files) & set(c.val_files)
    assert c.train_files == sorted(c.train_files) and c.val_files == sorted(c.val_files)
    assert textdata.ByteTokenizer().decode(c.val) == joined(texts, c.val_files)
    assert textdata.ByteTokenizer().decode(c.train) == joined(texts, c.train_files)
    assert c.name == str(tmp_path)


def test_folder_skips_non_utf8_hidden_and_cache_files(tmp_path):
    texts = write_tree(tmp_path, n=6)
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    (tmp_path / ".hidden.txt").write_text("secret\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "x.txt").write_text("cached\n")
    c = textdata.text_corpus(tmp_path, val_percent=50)
    assert sorted(c.train_files + c.val_files) == sorted(texts)


@pytest.mark.parametrize("to_val", [True, False])
def test_an_empty_side_takes_the_file_with_the_smallest_hash(tmp_path, to_val):
    val_percent = 50
    candidates = (f"file{i}.txt" for i in range(1000))  # two names the rule puts on one side
    names = [n for n in candidates if (path_hash(n) % 100 < val_percent) != to_val][:2]
    for name in names:
        (tmp_path / name).write_text(f"text of {name}\n")
    c = textdata.text_corpus(tmp_path, val_percent=val_percent)
    moved, stays = sorted(names, key=path_hash)
    assert (c.val_files, c.train_files) == (([moved], [stays]) if to_val else ([stays], [moved]))


def test_single_file_splits_at_a_line_start(tmp_path):
    lines = [f"{i}: " + "word " * (i % 7) + "\n" for i in range(400)]
    text = "".join(lines)
    (tmp_path / "notes.txt").write_text(text, encoding="utf-8")
    c = textdata.text_corpus(tmp_path / "notes.txt", val_percent=20)
    tok = c.tokenizer
    train, val = tok.decode(c.train), tok.decode(c.val)
    assert train + val == text and train.endswith("\n")
    assert val in ("".join(lines[k:]) for k in range(len(lines)))  # starts at a line
    longest = max(map(len, lines))
    assert abs(len(val) - 0.2 * len(text)) <= longest
    assert c.train_files == c.val_files == ["notes.txt"]


def test_single_file_max_bytes_truncates(tmp_path):
    text = "".join(f"é line {i}\n" for i in range(1000))
    (tmp_path / "notes.txt").write_text(text, encoding="utf-8")
    c = textdata.text_corpus(tmp_path / "notes.txt", max_bytes=2_000)
    assert 0 < len(c.train) + len(c.val) <= 2_000
    assert text.startswith(c.tokenizer.decode(torch.cat([c.train, c.val])))


def test_folder_with_one_file_is_split_like_a_single_file(tmp_path):
    (tmp_path / "only.txt").write_text("".join(f"line {i}\n" for i in range(50)))
    c = textdata.text_corpus(tmp_path)
    assert c.train_files == c.val_files == ["only.txt"] and len(c.val) > 0


# ---- byte tokens -------------------------------------------------------------------------

def test_byte_tokenizer_round_trips_any_text():
    tok = textdata.ByteTokenizer()
    for text in ["", "plain ascii", "é, 中文, emoji 🙂", "tab\tand\nnewline"]:
        ids = tok.encode(text)
        assert ids.dtype == torch.int64 and ids.shape == (len(text.encode("utf-8")),)
        assert ids.numel() == 0 or (0 <= int(ids.min()) and int(ids.max()) <= 255)
        assert tok.decode(ids) == text and tok.decode(ids.tolist()) == text
    assert len(tok.encode("中")) == 3 and tok.vocab_size == 256 and tok.name == "bytes"


def test_decoding_invalid_bytes_does_not_raise():
    tok = textdata.ByteTokenizer()
    cut = tok.encode("中文")[:-1]  # the last character cut in half
    assert tok.decode(cut).startswith("中") and "\ufffd" in tok.decode(cut)
    assert tok.decode([0xFF, 0xFE, 65]).endswith("A")
    with pytest.raises(ValueError):
        tok.decode([300])


# ---- bad input: one sentence each ----------------------------------------------------------

def one_sentence(exc: pytest.ExceptionInfo) -> bool:
    return "\n" not in str(exc.value) and str(exc.value).endswith(".")


def test_missing_or_empty_text_is_corpus_missing(tmp_path):
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "blank.txt").write_text("  \n\t\n")
    (tmp_path / "empty_dir").mkdir()
    (tmp_path / "binary_dir").mkdir()
    (tmp_path / "binary_dir" / "x.bin").write_bytes(b"\xff\xfe\x00\x81")
    for path in ["missing", "missing/deeper.txt", "empty.txt", "blank.txt", "empty_dir", "binary_dir"]:
        with pytest.raises(textdata.CorpusMissing) as exc:
            textdata.text_corpus(tmp_path / path)
        assert isinstance(exc.value, FileNotFoundError) and isinstance(exc.value, data.DatasetMissing)
        assert one_sentence(exc)
    with pytest.raises(textdata.CorpusMissing) as exc:
        textdata.stdlib_files(tmp_path / "empty_dir")
    assert one_sentence(exc)


def test_bad_split_arguments_are_value_errors(tmp_path):
    write_tree(tmp_path, n=3)
    for kwargs in [dict(val_percent=0), dict(val_percent=51), dict(max_bytes=0)]:
        with pytest.raises(ValueError) as exc:
            textdata.text_corpus(tmp_path, **kwargs)
        assert one_sentence(exc)


# ---- next-token windows ------------------------------------------------------------------

def test_lm_windows_are_shifted_views():
    tokens = torch.arange(103)
    x, y = textdata.lm_windows(tokens, block=10)
    assert x.shape == y.shape == ((103 - 1) // 10, 10)
    for i in range(len(x)):
        assert torch.equal(y[i, :-1], x[i, 1:])
        if i + 1 < len(x):
            assert y[i, -1] == x[i + 1, 0]
    assert torch.equal(x.flatten(), tokens[:100]) and torch.equal(y.flatten(), tokens[1:101])
    ptr = tokens.untyped_storage().data_ptr()
    assert x.untyped_storage().data_ptr() == ptr and y.untyped_storage().data_ptr() == ptr


def test_lm_windows_of_a_slice_start_at_the_slice():
    tokens = torch.arange(50)
    x, y = textdata.lm_windows(tokens[7:], block=4)
    assert x[0].tolist() == [7, 8, 9, 10] and y[0].tolist() == [8, 9, 10, 11]


def test_lm_windows_need_block_plus_one_tokens():
    x, _ = textdata.lm_windows(torch.arange(9), block=8)
    assert x.shape == (1, 8)
    with pytest.raises(ValueError) as exc:
        textdata.lm_windows(torch.arange(8), block=8)
    assert "8" in str(exc.value) and "9" in str(exc.value) and one_sentence(exc)
    with pytest.raises(ValueError):
        textdata.lm_windows(torch.arange(20).view(4, 5), block=2)


def test_tensor_loader_over_windows_gives_int64_batches(small_stdlib):
    x, y = textdata.lm_windows(small_stdlib.train, block=32)
    loader = data.TensorLoader(x, y, batch_size=16, seed=0)
    xb, yb = next(iter(loader))
    assert xb.shape == yb.shape == (16, 32) and xb.dtype == yb.dtype == torch.int64
    assert torch.equal(xb[:, 1:], yb[:, :-1])
    assert len(loader) == math.ceil(len(x) / 16)


# ---- the unigram baseline ------------------------------------------------------------------

def test_unigram_loss_matches_the_formula():
    train, val, vocab = torch.tensor([0, 0, 0, 1]), torch.tensor([0, 1, 2, 2]), 3
    counts = [3 + 1, 1 + 1, 0 + 1]  # add-one smoothing
    expected = -sum(math.log(counts[t] / sum(counts)) for t in val.tolist()) / len(val)
    assert textdata.unigram_loss(train, val, vocab) == pytest.approx(expected, rel=1e-12)


def test_unigram_loss_of_uniform_text_is_log_vocab():
    vocab = 50
    train, val = torch.arange(vocab).repeat(7), torch.arange(vocab)
    assert textdata.unigram_loss(train, val, vocab) == pytest.approx(math.log(vocab), rel=1e-12)


def test_unigram_loss_of_python_source_beats_uniform(small_stdlib):
    loss = textdata.unigram_loss(small_stdlib.train, small_stdlib.val, 256)
    assert 0 < loss < math.log(256)


def test_unigram_loss_rejects_ids_outside_the_vocabulary():
    with pytest.raises(ValueError) as exc:
        textdata.unigram_loss(torch.tensor([0, 1]), torch.tensor([5]), 3)
    assert one_sentence(exc)
