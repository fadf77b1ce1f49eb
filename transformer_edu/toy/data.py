"""The toy Japanese -> English corpus at run time: reading, tokens, vocabulary, batches.

Bottom up: the shipped corpus file (``load_corpus``), Japanese segmentation and English
tokenization, ``Vocab``, and padded ``Batch``es. The file is generated, not collected:
``transformer_edu.toy.corpus.grammar`` wrote it (build time, never imported here), and its
held-out ``"test"`` split holds unseen *combinations* of words seen in training.
"""

from __future__ import annotations

import functools
import random
import statistics
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from importlib import resources
from typing import NamedTuple

import torch
from torch import Tensor

__all__ = [
    "SPLITS",
    "Batch",
    "Pair",
    "Vocab",
    "batches",
    "build_vocabs",
    "corpus_lexicon",
    "corpus_stats",
    "detokenize_en",
    "load_corpus",
    "make_batch",
    "order_pairs",
    "segment",
    "tokenize_en",
]

SPLITS = ("train", "test", "all")
CORPUS_FILE = "ja_en.tsv"  # inside transformer_edu/toy/corpus/
HEADER = "split\tja\ten"
# the book's running example of word order: order_pairs puts its pair first
_ORDER_EXAMPLE = "私 は 犬 より 猫 が 好き です"


class Pair(NamedTuple):
    """One sentence pair: Japanese tokens and English tokens."""

    src: tuple[str, ...]  # Japanese tokens, e.g. ("私", "は", "太郎", "です")
    tgt: tuple[str, ...]  # English tokens, e.g. ("I", "am", "Taro")

    @property
    def ja(self) -> str:
        """The natural, unsegmented Japanese sentence: 私は太郎です."""
        return "".join(self.src)

    @property
    def en(self) -> str:
        """The English tokens joined by single spaces: "Do you like cats ?"."""
        return " ".join(self.tgt)


# --- 1. the corpus file ---------------------------------------------------------------


@functools.cache
def _read_corpus() -> dict[str, tuple[Pair, ...]]:
    """The shipped file, parsed once: split -> pairs."""
    text = (
        resources.files("transformer_edu")
        .joinpath("toy", "corpus", CORPUS_FILE)
        .read_text(encoding="utf-8")
    )
    lines = text.splitlines()
    if not lines or lines[0] != HEADER:
        raise ValueError(f"{CORPUS_FILE}: first line is not the header {HEADER!r}")
    splits: dict[str, list[Pair]] = {"train": [], "test": []}
    for number, line in enumerate(lines[1:], start=2):
        split, ja, en = line.split("\t")
        if split not in splits:
            raise ValueError(f"{CORPUS_FILE}:{number}: unknown split {split!r}")
        splits[split].append(Pair(tuple(ja.split(" ")), tuple(en.split(" "))))
    return {k: tuple(v) for k, v in splits.items()}


def load_corpus(split: str = "train") -> list[Pair]:
    """The shipped pairs of one split: "train", "test" (held out) or "all"."""
    if split not in SPLITS:
        raise ValueError(f"split={split!r}; expected one of {SPLITS}")
    corpus = _read_corpus()
    if split == "all":
        return [*corpus["train"], *corpus["test"]]
    return list(corpus[split])


def order_pairs(split: str = "train") -> list[tuple[Pair, Pair]]:
    """Sentence pairs with the same Japanese tokens in another order and a different
    English meaning; 私は犬より猫が好きです / 私は猫より犬が好きです come first."""
    groups: dict[tuple[str, ...], list[Pair]] = {}
    for p in load_corpus(split):
        groups.setdefault(tuple(sorted(p.src)), []).append(p)
    out = [
        (a, b)
        for group in groups.values()
        for i, a in enumerate(group)
        for b in group[i + 1 :]
        if a.tgt != b.tgt
    ]
    # a stable sort: the running example first, the rest in file order
    out.sort(key=lambda ab: _ORDER_EXAMPLE not in (" ".join(p.src) for p in ab))
    return out


def corpus_stats(pairs: Sequence[Pair]) -> dict:
    """Sizes and source-length figures of some pairs (for the book and the report)."""
    lengths = [len(p.src) for p in pairs]
    return {
        "pairs": len(pairs),
        "src_len_min": min(lengths),
        "src_len_median": statistics.median(lengths),
        "src_len_max": max(lengths),
        "tgt_len_max": max(len(p.tgt) for p in pairs),
        "src_len_histogram": dict(sorted(Counter(lengths).items())),
    }


# --- 2. segmentation and tokenization -------------------------------------------------


@functools.cache
def corpus_lexicon() -> frozenset[str]:
    """Every Japanese word of the shipped corpus."""
    return frozenset(w for p in load_corpus("all") for w in p.src)


_TRAILING = "。．.？?！!"


def segment(text: str, lexicon: Iterable[str] | None = None) -> list[str]:
    """Split a Japanese sentence into words by longest match over ``lexicon``.

    A run of characters where no known word starts is one token, so an unknown word
    comes out whole (私はピカチュウです -> 私/は/ピカチュウ/です). Spaces (ASCII or
    full-width) separate chunks, each segmented on its own: 私は 太郎です works too.
    Surrounding whitespace and final 。/./？/? are dropped.
    """
    words = corpus_lexicon() if lexicon is None else frozenset(lexicon)
    text = text.strip().rstrip(_TRAILING).strip()
    longest = max(map(len, words), default=1)
    # str.split() with no argument splits on any Unicode space, U+3000 included
    return [t for chunk in text.split() for t in _longest_match(chunk, words, longest)]


def _longest_match(text: str, words: frozenset[str], longest: int) -> list[str]:
    """Segment one chunk with no spaces in it (see ``segment``)."""
    tokens, unknown, i = [], "", 0
    while i < len(text):
        match = next(
            (
                text[i : i + n]
                for n in range(min(longest, len(text) - i), 0, -1)
                if text[i : i + n] in words
            ),
            None,
        )
        if match is None:
            unknown += text[i]
            i += 1
            continue
        if unknown:
            tokens.append(unknown)
            unknown = ""
        tokens.append(match)
        i += len(match)
    if unknown:
        tokens.append(unknown)
    return tokens


_PUNCTUATION = "?!.,"


def tokenize_en(text: str) -> list[str]:
    """English words split on whitespace, with ? ! . , as tokens of their own.

    Case is kept: "Do you like cats?" -> ["Do", "you", "like", "cats", "?"].
    """
    for mark in _PUNCTUATION:
        text = text.replace(mark, f" {mark} ")
    return text.split()


def detokenize_en(tokens: Iterable[str]) -> str:
    """Tokens back to text, punctuation attached: [..., "cats", "?"] -> "...cats?"."""
    out = ""
    for t in tokens:
        out += t if (t in _PUNCTUATION or not out) else " " + t
    return out


# --- 3. vocabulary --------------------------------------------------------------------


class Vocab:
    """Tokens <-> ids. Ids: the four specials, then tokens by descending frequency,
    ties in code-point order, so the same corpus always gives the same ids."""

    PAD, BOS, EOS, UNK = 0, 1, 2, 3
    SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")

    def __init__(self, itos: Sequence[str]):
        if tuple(itos[:4]) != self.SPECIALS:
            raise ValueError(
                f"a vocabulary starts with {self.SPECIALS}, got {tuple(itos[:4])}"
            )
        self.itos = list(itos)
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            dup = [s for s, n in Counter(self.itos).items() if n > 1]
            raise ValueError(f"duplicate tokens in vocabulary: {dup}")

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_freq: int = 1) -> Vocab:
        """A vocabulary of every token seen at least ``min_freq`` times."""
        if min_freq < 1:
            raise ValueError(f"min_freq={min_freq} must be at least 1")
        counts = Counter(t for s in sentences for t in s)
        kept = [t for t, n in counts.items() if n >= min_freq and t not in cls.SPECIALS]
        kept.sort(key=lambda t: (-counts[t], t))
        return cls([*cls.SPECIALS, *kept])

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def __repr__(self) -> str:
        return f"Vocab({len(self)} tokens: {self.itos[4:9]}...)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos

    __hash__ = None  # type: ignore[assignment]

    def encode(
        self, tokens: Iterable[str], bos: bool = False, eos: bool = False
    ) -> list[int]:
        """Token ids, unknown tokens as UNK, optionally framed by BOS ... EOS."""
        ids = [self.stoi.get(t, self.UNK) for t in tokens]
        return [self.BOS] * bos + ids + [self.EOS] * eos

    def decode(
        self, ids: Iterable[int] | Tensor, strip_special: bool = True
    ) -> list[str]:
        """Tokens up to the first EOS; PAD, BOS and EOS dropped if ``strip_special``."""
        if isinstance(ids, Tensor):
            if ids.dim() != 1:
                raise ValueError(
                    f"decode takes one sequence, got shape {tuple(ids.shape)}"
                )
            ids = ids.tolist()
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < len(self.itos):
                raise ValueError(
                    f"id {i} is outside the vocabulary of size {len(self)}"
                )
            if i == self.EOS:
                if not strip_special:
                    out.append(self.itos[i])
                break
            if strip_special and i in (self.PAD, self.BOS):
                continue
            out.append(self.itos[i])
        return out

    def unknown(self, tokens: Iterable[str]) -> list[str]:
        """The tokens this vocabulary does not know, in order, each once."""
        return list(dict.fromkeys(t for t in tokens if t not in self.stoi))

    def to_dict(self) -> dict:
        return {"itos": list(self.itos)}

    @classmethod
    def from_dict(cls, d: dict) -> Vocab:
        if "itos" not in d:
            raise ValueError(f"a vocabulary dict needs the key 'itos', got {sorted(d)}")
        return cls(d["itos"])


def build_vocabs(pairs: Iterable[Pair], min_freq: int = 1) -> tuple[Vocab, Vocab]:
    """Source (Japanese) and target (English) vocabularies of ``pairs``."""
    pairs = list(pairs)
    return (
        Vocab.build((p.src for p in pairs), min_freq),
        Vocab.build((p.tgt for p in pairs), min_freq),
    )


# --- 4. batches -----------------------------------------------------------------------


class Batch(NamedTuple):
    """Padded id tensors of some pairs, ready for teacher forcing.

    Shape: src (B, S); tgt_in (B, T) = BOS + target; tgt_out (B, T) = target + EOS;
    all padded with PAD = 0.
    """

    src: Tensor  # (B, S)
    tgt_in: Tensor  # (B, T)
    tgt_out: Tensor  # (B, T)
    pairs: list[Pair]

    @property
    def ntokens(self) -> int:
        """Number of real (non-PAD) target tokens: the loss is averaged over these."""
        return int((self.tgt_out != Vocab.PAD).sum())

    def to(self, device: torch.device | str) -> Batch:
        return self._replace(
            src=self.src.to(device),
            tgt_in=self.tgt_in.to(device),
            tgt_out=self.tgt_out.to(device),
        )


def pad_rows(rows: list[list[int]]) -> Tensor:
    """Rows of ids, right-padded with PAD to the longest: (len(rows), longest)."""
    width = max(map(len, rows))
    # one tensor from padded lists: faster than a tensor per row copied into place
    return torch.tensor([[*row, *[Vocab.PAD] * (width - len(row))] for row in rows],
                        dtype=torch.long)  # fmt: skip


def make_batch(pairs: Sequence[Pair], src_vocab: Vocab, tgt_vocab: Vocab) -> Batch:
    """Encode and pad ``pairs`` into one Batch."""
    pairs = list(pairs)
    if not pairs:
        raise ValueError("make_batch needs at least one pair, got 0")
    src = pad_rows([src_vocab.encode(p.src) for p in pairs])  # (B, S)
    tgt = [tgt_vocab.encode(p.tgt) for p in pairs]
    tgt_in = pad_rows([[Vocab.BOS, *t] for t in tgt])  # (B, T)
    tgt_out = pad_rows([[*t, Vocab.EOS] for t in tgt])  # (B, T)
    return Batch(src, tgt_in, tgt_out, pairs)


def batches(
    pairs: Sequence[Pair],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    batch_size: int,
    shuffle: bool = True,
    seed: int = 0,
    sort_by_length: bool = False,
) -> Iterator[Batch]:
    """One epoch of Batches; the same ``seed`` gives the same batches.

    ``sort_by_length`` groups sentences of similar source length (less padding); the
    order of the batches is still shuffled when ``shuffle``.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be at least 1")
    pairs = list(pairs)
    order = list(range(len(pairs)))
    rng = random.Random(seed)
    if shuffle:
        rng.shuffle(order)
    if sort_by_length:  # a stable sort keeps the shuffled order among equal lengths
        order.sort(key=lambda i: (len(pairs[i].src), len(pairs[i].tgt)))
    chunks = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    if shuffle and sort_by_length:
        rng.shuffle(chunks)
    for chunk in chunks:
        yield make_batch([pairs[i] for i in chunk], src_vocab, tgt_vocab)
