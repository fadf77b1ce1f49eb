"""Tests for transformer_edu/toy/data.py (the corpus, segmentation, Vocab and batches) and
the grammar that writes the corpus, transformer_edu/toy/corpus/grammar.py."""

import subprocess
import sys
from collections import Counter
from importlib import resources
from pathlib import Path

import pytest
import torch

from transformer_edu.toy.corpus.grammar import corpus_text, generate, main, write_corpus
from transformer_edu.toy.data import (
    Batch,
    Pair,
    Vocab,
    batches,
    build_vocabs,
    corpus_lexicon,
    corpus_stats,
    detokenize_en,
    load_corpus,
    make_batch,
    order_pairs,
    segment,
    tokenize_en,
)

RUNNING_EXAMPLES = {
    "私は太郎です": ("私 は 太郎 です", "I am Taro"),
    "私は犬より猫が好きです": (
        "私 は 犬 より 猫 が 好き です",
        "I like cats more than dogs",
    ),
    "私は猫より犬が好きです": (
        "私 は 猫 より 犬 が 好き です",
        "I like dogs more than cats",
    ),
}


@pytest.fixture(scope="module")
def train():
    return load_corpus("train")


@pytest.fixture(scope="module")
def test_split():
    return load_corpus("test")


@pytest.fixture(scope="module")
def vocabs(train):
    return build_vocabs(train)


# --- the corpus -------------------------------------------------------------------


def test_running_examples_are_in_train(train):
    by_ja = {p.ja: p for p in train}
    for ja, (tokens, en) in RUNNING_EXAMPLES.items():
        assert ja in by_ja, ja
        assert by_ja[ja].src == tuple(tokens.split())
        assert by_ja[ja].en == en
    assert train[0] == Pair(("私", "は", "太郎", "です"), ("I", "am", "Taro"))


def test_sizes_and_lengths(train, test_split):
    total = len(train) + len(test_split)
    assert 1500 <= total <= 2500
    assert 0.10 <= len(test_split) / total <= 0.16
    assert len(load_corpus("all")) == total
    for pairs in (train, test_split):
        stats = corpus_stats(pairs)
        assert stats["src_len_min"] <= 4 and stats["src_len_max"] >= 14
    # enough long held-out sentences to plot accuracy against length
    assert sum(len(p.src) >= 10 for p in test_split) >= 50
    assert sum(len(p.src) <= 6 for p in test_split) >= 50


def test_splits_are_disjoint_and_without_duplicates(train, test_split):
    ja_train, ja_test = [p.ja for p in train], [p.ja for p in test_split]
    assert len(set(ja_train)) == len(ja_train)
    assert len(set(ja_test)) == len(ja_test)
    assert not set(ja_train) & set(ja_test)


def test_one_translation_per_sentence_and_clean_tokens():
    for p in load_corpus("all"):
        assert all(t and " " not in t and "\t" not in t for t in p.src + p.tgt), p
        assert p.tgt[0][0].isupper(), p  # English sentences start with a capital
        assert ("?" in p.tgt) == (p.src[-1] == "か"), p  # questions end in か and ?
    assert Counter(p.ja for p in load_corpus("all")).most_common(1)[0][1] == 1


def test_held_out_split_is_new_combinations_of_seen_words():
    examples = generate()
    train_cores = {(e.template, e.core) for e in examples if e.split == "train"}
    test_cores = {(e.template, e.core) for e in examples if e.split == "test"}
    assert test_cores and not train_cores & test_cores
    # the cores name the content words: e.g. (subject, verb, object) for actions
    svo = [e for e in examples if e.template == "action" and e.split == "test"]
    assert len(svo) >= 30 and all(len(e.core) == 3 for e in svo)
    seen = {w for e in examples if e.split == "train" for w in e.pair.src + e.pair.tgt}
    for e in examples:
        if e.split == "test":
            assert set(e.pair.src + e.pair.tgt) <= seen, e
    # each template contributes to the held-out split
    assert {t for t, _ in test_cores} == {e.template for e in examples}


def test_shipped_file_equals_the_generator():
    shipped = (
        resources.files("transformer_edu")
        .joinpath("toy", "corpus", "ja_en.tsv")
        .read_text(encoding="utf-8")
    )
    assert shipped == corpus_text(), (
        "regenerate: python -m transformer_edu.toy.corpus.grammar"
    )
    assert main(["--check"]) == 0
    examples = generate()
    assert [e.pair for e in examples if e.split == "train"] == load_corpus("train")
    assert [e.pair for e in examples if e.split == "test"] == load_corpus("test")


def test_write_corpus_to_a_path(tmp_path):
    path = write_corpus(tmp_path / "c.tsv")
    assert path.read_text(encoding="utf-8") == corpus_text()


def test_reading_the_corpus_does_not_import_the_grammar():
    # the grammar is build-time code: training only reads the file it wrote
    code = (
        "import sys, transformer_edu, transformer_edu.toy.training\n"
        "transformer_edu.toy.data.load_corpus('all')\n"
        "print(sorted(m for m in sys.modules if m.startswith('transformer_edu.toy.corpus')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).parents[2],  # import this checkout's package
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]", out.stdout


def test_load_corpus_rejects_unknown_split():
    with pytest.raises(ValueError, match="'dev'"):
        load_corpus("dev")


def test_order_pairs():
    pairs = order_pairs()
    assert len(pairs) >= 10
    first = {pairs[0][0].ja, pairs[0][1].ja}
    assert first == {"私は犬より猫が好きです", "私は猫より犬が好きです"}
    found = {frozenset((a.ja, b.ja)) for a, b in pairs}
    assert frozenset(("太郎は花子を見ました", "花子は太郎を見ました")) in found
    assert frozenset(("犬は猫より大きいです", "猫は犬より大きいです")) in found
    train = set(load_corpus("train"))
    for a, b in pairs:
        assert sorted(a.src) == sorted(b.src) and a.src != b.src
        assert a.tgt != b.tgt and a in train and b in train


# --- segmentation and tokenization ---------------------------------------------------


def test_segment_running_examples():
    for ja, (tokens, _) in RUNNING_EXAMPLES.items():
        assert segment(ja) == tokens.split()
    assert segment(" 私は太郎です。 ") == ["私", "は", "太郎", "です"]
    assert segment("あなたは学生ですか？") == ["あなた", "は", "学生", "です", "か"]
    assert segment("私 は  太郎 です") == ["私", "は", "太郎", "です"]


@pytest.mark.parametrize("space", [" ", "\u3000", " \u3000 "])
def test_segment_segments_each_space_separated_chunk(space):
    assert segment(f"私は{space}太郎です") == ["私", "は", "太郎", "です"]
    assert segment(f"私は{space}ピカチュウです。") == ["私", "は", "ピカチュウ", "です"]
    assert segment(f"{space}彼女は彼{space}", lexicon={"彼", "彼女", "は"}) == [
        "彼女",
        "は",
        "彼",
    ]


def test_segment_recovers_every_corpus_sentence():
    for p in load_corpus("all"):
        assert segment(p.ja) == list(p.src), p


def test_segment_reports_unknown_words_by_name(vocabs):
    src_vocab, _ = vocabs
    tokens = segment("私はピカチュウです")
    assert tokens == ["私", "は", "ピカチュウ", "です"]
    assert src_vocab.unknown(tokens) == ["ピカチュウ"]
    assert src_vocab.encode(tokens)[2] == Vocab.UNK
    assert "ピカチュウ" not in corpus_lexicon()


def test_segment_longest_match_with_own_lexicon():
    assert segment("彼女は彼", lexicon={"彼", "彼女", "は"}) == ["彼女", "は", "彼"]
    assert segment("abc彼", lexicon={"彼"}) == ["abc", "彼"]
    assert segment("", lexicon={"彼"}) == []


def test_english_tokens():
    assert tokenize_en("Do you like cats?") == ["Do", "you", "like", "cats", "?"]
    assert tokenize_en("  I am Taro ") == ["I", "am", "Taro"]
    assert detokenize_en(["Do", "you", "like", "cats", "?"]) == "Do you like cats?"
    for p in load_corpus("test")[:50]:
        assert tokenize_en(detokenize_en(p.tgt)) == list(p.tgt)
        assert tokenize_en(p.en) == list(p.tgt)


# --- vocabulary ---------------------------------------------------------------------


def test_special_ids():
    assert (Vocab.PAD, Vocab.BOS, Vocab.EOS, Vocab.UNK) == (0, 1, 2, 3)
    v = Vocab.build([["a"]])
    assert v.itos[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert (v.PAD, v.stoi["<unk>"]) == (0, 3)


def test_vocab_order_is_frequency_then_code_point():
    v = Vocab.build([["b", "a", "c"], ["c", "b"], ["c"]])
    assert v.itos[4:] == ["c", "b", "a"]
    assert Vocab.build([["c", "b"], ["c"]], min_freq=2).itos[4:] == ["c"]
    with pytest.raises(ValueError, match="min_freq=0"):
        Vocab.build([["a"]], min_freq=0)


def test_vocab_round_trip(vocabs, train):
    src_vocab, tgt_vocab = vocabs
    assert 100 < len(src_vocab) < 400 and 100 < len(tgt_vocab) < 400
    for p in train[:100]:
        ids = tgt_vocab.encode(p.tgt, bos=True, eos=True)
        assert ids[0] == Vocab.BOS and ids[-1] == Vocab.EOS
        assert tgt_vocab.decode(ids) == list(p.tgt)
        assert src_vocab.decode(src_vocab.encode(p.src)) == list(p.src)
    ids = tgt_vocab.encode(["I", "am", "Taro"], eos=True)
    assert tgt_vocab.decode(torch.tensor([*ids, 5, 6])) == ["I", "am", "Taro"]
    assert tgt_vocab.decode([1, *ids, 0], strip_special=False) == [
        "<bos>",
        "I",
        "am",
        "Taro",
        "<eos>",
    ]
    assert tgt_vocab.encode(["I", "am", "Pikachu"])[-1] == Vocab.UNK
    assert tgt_vocab.unknown(["Pikachu", "I", "Zed", "Pikachu"]) == ["Pikachu", "Zed"]
    with pytest.raises(ValueError, match="9999"):
        tgt_vocab.decode([9999])


def test_vocab_dict_round_trip(vocabs):
    src_vocab, _ = vocabs
    again = Vocab.from_dict(src_vocab.to_dict())
    assert again == src_vocab and again.stoi == src_vocab.stoi
    with pytest.raises(ValueError, match="itos"):
        Vocab.from_dict({})
    with pytest.raises(ValueError, match="starts with"):
        Vocab(["a", "b"])


def test_vocab_is_deterministic(train):
    a, b = build_vocabs(train), build_vocabs(list(reversed(train)))
    assert a[0].itos == b[0].itos and a[1].itos == b[1].itos


# --- batches ---------------------------------------------------------------------


def test_make_batch_pads_and_shifts(vocabs, train):
    src_vocab, tgt_vocab = vocabs
    pairs = [train[0], train[1], max(train, key=lambda p: len(p.src))]
    batch = make_batch(pairs, src_vocab, tgt_vocab)
    assert isinstance(batch, Batch) and batch.pairs == pairs
    S = max(len(p.src) for p in pairs)
    T = max(len(p.tgt) for p in pairs) + 1
    assert batch.src.shape == (3, S) and batch.src.dtype == torch.long
    assert batch.tgt_in.shape == batch.tgt_out.shape == (3, T)
    for i, p in enumerate(pairs):
        n, t = len(p.src), len(p.tgt)
        assert batch.src[i, :n].tolist() == src_vocab.encode(p.src)
        assert (batch.src[i, n:] == Vocab.PAD).all()
        assert batch.tgt_in[i, 0] == Vocab.BOS
        assert batch.tgt_out[i, t] == Vocab.EOS
        # teacher forcing: the input is the output shifted right by one
        assert batch.tgt_in[i, 1 : t + 1].tolist() == batch.tgt_out[i, :t].tolist()
        assert (batch.tgt_in[i, t + 1 :] == Vocab.PAD).all()
        assert (batch.tgt_out[i, t + 1 :] == Vocab.PAD).all()
    assert batch.ntokens == sum(len(p.tgt) + 1 for p in pairs)
    assert batch.to("cpu").src.equal(batch.src)
    with pytest.raises(ValueError, match="at least one pair"):
        make_batch([], src_vocab, tgt_vocab)


def _epoch(pairs, vocabs, **kwargs):
    return [b.pairs for b in batches(pairs, *vocabs, **kwargs)]


def test_batches_are_deterministic_and_cover_each_pair_once(vocabs, train):
    a = _epoch(train, vocabs, batch_size=64, seed=3)
    assert a == _epoch(train, vocabs, batch_size=64, seed=3)
    assert a != _epoch(train, vocabs, batch_size=64, seed=4)
    assert sorted(p for b in a for p in b) == sorted(train)
    assert [len(b) for b in a] == [64] * (len(train) // 64) + [len(train) % 64]
    ordered = _epoch(train, vocabs, batch_size=64, shuffle=False)
    assert [p for b in ordered for p in b] == train


def test_sorted_batches_pad_less(vocabs, train):
    def padding(**kwargs):
        return sum(
            int((b.src == Vocab.PAD).sum())
            for b in batches(train, *vocabs, batch_size=32, **kwargs)
        )

    kwargs = dict(batch_size=32, seed=1, sort_by_length=True)
    assert _epoch(train, vocabs, **kwargs) == _epoch(train, vocabs, **kwargs)
    assert padding(sort_by_length=True) < padding(sort_by_length=False) / 3
    with pytest.raises(ValueError, match="batch_size=0"):
        next(batches(train, *vocabs, batch_size=0))
