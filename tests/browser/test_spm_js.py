"""spm.js (the browser's SentencePiece) against Python's ``sentencepiece``.

One Node process runs ``transformer_edu/browser/static/spm.js`` over a file of inputs
(``spm_js_run.mjs``); Python's ``SentencePieceProcessor`` gives the expected pieces,
ids, decoded text and normalised text. Inputs: every sentence of the shipped Tatoeba
corpus (all splits, both languages), seeded random strings of what a text box can
hold, every Unicode code point, random id sequences for decode, and models whose
normaliser flags differ from ours.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import unicodedata
from pathlib import Path

import pytest
import sentencepiece as spm

import transformer_edu.browser
from transformer_edu.browser.spm_vocab import (
    float32_text,
    spm_vocab,
    write_spm_vocab,
)
from transformer_edu.tatoeba.data import SPLITS, SPM_FILE, _corpus_bytes, load_tatoeba

RUNNER = Path(__file__).resolve().parents[1] / "helpers" / "spm_js_run.mjs"
SPM_JS = Path(transformer_edu.browser.__file__).parent / "static" / "spm.js"
N_RANDOM = 20_000  # random strings, and random id sequences
SEED = 20240612

# Code points by what a text box may be given (typed, pasted, from an IME).
# fmt: off
POOLS = {
    "ascii": [(0x20, 0x7E)],
    "controls": [(0x00, 0x1F), (0x7F, 0x9F)],
    "spaces": [(c, c) for c in (0x20, 0x09, 0x0A, 0x0D, 0xA0, 0x1680, 0x202F, 0x205F,
                                0x3000, 0xFEFF, 0x2581, 0xFFFD, 0x2028, 0x2029)]
              + [(0x2000, 0x200F)],
    "kana": [(0x3040, 0x30FF), (0x31F0, 0x31FF)],
    "half/full width": [(0xFF01, 0xFFEE)],
    "cjk": [(0x4E00, 0x9FFF), (0x3400, 0x4DBF)],
    "cjk ext. b+ (𩸽), compatibility, radicals": [
        (0x20000, 0x2A6DF), (0x29E3D, 0x29E3D), (0x2A700, 0x2EBEF), (0xF900, 0xFAFF),
        (0x2F800, 0x2FA1F), (0x2E80, 0x2FDF), (0x30000, 0x3134F)],
    "cjk symbols, enclosed, squared": [(0x3000, 0x303F), (0x3200, 0x33FF),
                                       (0x1F200, 0x1F2FF)],
    "combining marks": [(0x0300, 0x036F), (0x3099, 0x309C), (0x20D0, 0x20FF),
                        (0xFE20, 0xFE2F), (0x1AB0, 0x1AFF)],
    "latin, greek, cyrillic": [(0xA0, 0x24F), (0x1E00, 0x1EFF), (0x370, 0x4FF)],
    "hangul": [(0xAC00, 0xD7A3), (0x1100, 0x11FF), (0x3130, 0x318F), (0xFFA0, 0xFFDC)],
    "arabic, presentation forms": [(0x600, 0x6FF), (0xFB50, 0xFDFF), (0xFE70, 0xFEFF)],
    "compatibility forms": [(0x2070, 0x218F), (0x2460, 0x24FF), (0xFB00, 0xFB4F),
                            (0x1D400, 0x1D7FF), (0x1F100, 0x1F1FF)],
    "emoji, zwj, variation selectors, tags": [
        (0x1F300, 0x1FAFF), (0x2600, 0x27BF), (0x1F3FB, 0x1F3FF), (0x200D, 0x200D),
        (0xFE00, 0xFE0F), (0xE0100, 0xE01EF), (0xE0000, 0xE007F), (0x1F1E6, 0x1F1FF)],
    "unicode 13-15 additions": [(0x1FBF0, 0x1FBF9), (0xA7F2, 0xA7F4),
                                (0x10780, 0x107BA), (0x1E030, 0x1E08F)],
    "private use, noncharacters": [(0xE000, 0xF8FF), (0xF0000, 0xF00FF),
                                   (0xFDD0, 0xFDEF), (0xFFF0, 0xFFFF),
                                   (0x10FFFE, 0x10FFFF)],
    "unpaired surrogates": [(0xD800, 0xDFFF)],  # a DOM string can hold one
    "any": [(0x0, 0x10FFFF)],
}
# fmt: on

# Inputs picked by hand, beside the random ones: whitespace alone, "▁" itself, piece
# syntax, a character no piece covers (byte fallback), decompositions and ligatures
# whose NFKC is long, a BOM, ZWJ emoji, CR LF.
TRICKY = [
    "",
    " ",
    "   ",
    "\u3000",
    "▁",
    "▁▁a▁",
    " ▁ ",
    "<0x41>",
    "<unk>",
    "<s></s>",
    "𩸽",
    "𩸽を食べる",
    "a\u0301",
    "ｶﾞｷﾞ",
    "㍻",
    "\ufdfa",
    "\ufeffa",
    "a\ufffdb",
    "e\u0301\u0301",
    "👩\u200d💻",
    "1\r\n2",
    "\t x \n",
    "私は太郎です",
    "私は 太郎です",
    " 私は\u3000 太郎です。 ",
    "ＡＢＣ　１２３",
    "10、000円",
    "\x00",
    "\x00a\x00",
]


def node() -> str:
    path = shutil.which("node")
    if path is None:
        pytest.fail(
            "node is not on PATH: tests/browser/test_spm_js.py runs spm.js in Node.js "
            "(`make test` installs it: apt-get install nodejs npm)"
        )
    return path


def as_python_text(text: str) -> str:
    """The text as the page hands it to spm.js's TextEncoder: each unpaired surrogate
    becomes U+FFFD (Python's binding refuses them; a surrogate pair is one character)."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def run_js(vocab: dict, texts, id_lists, tmp_path: Path, nfkc: bool = False):
    """spm.js's [pieces, ids, decode, normalize(, NFKC)] per text, decode per id list."""
    vocab_path, job, out = (
        tmp_path / "vocab.json",
        tmp_path / "job.json",
        tmp_path / "out",
    )
    vocab_path.write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf8")
    job.write_text(json.dumps({"texts": texts, "ids": id_lists, "nfkc": nfkc}))
    subprocess.run(
        [node(), RUNNER, SPM_JS, vocab_path, job, out], check=True, timeout=600
    )
    # one row a line ("\n" only: a JSON string may hold U+2028 or U+0085 unescaped)
    rows = [
        json.loads(line) for line in out.read_text(encoding="utf8").split("\n")[:-1]
    ]
    return rows[: len(texts)], rows[len(texts) :]


def run_python(sp: spm.SentencePieceProcessor, texts, id_lists):
    texts = [as_python_text(t) for t in texts]
    pieces, ids = sp.encode(texts, out_type=str), sp.encode(texts)
    decoded = sp.decode(ids)
    encoded = [
        [p, i, d, sp.normalize(t)]
        for p, i, d, t in zip(pieces, ids, decoded, texts, strict=True)
    ]
    return encoded, [_decode(sp, ids) for ids in id_lists]


def _decode(sp, ids):
    try:
        return sp.decode(ids)
    except IndexError:  # an id out of range; spm.js throws a RangeError
        return {"error": "RangeError"}


def mismatches(inputs, got, want) -> list:
    return [(x, g, w) for x, g, w in zip(inputs, got, want, strict=True) if g != w]


def compare(vocab: dict, sp, texts, id_lists, tmp_path) -> tuple[list, list]:
    js_enc, js_dec = run_js(vocab, texts, id_lists, tmp_path)
    py_enc, py_dec = run_python(sp, texts, id_lists)
    return mismatches(texts, js_enc, py_enc), mismatches(id_lists, js_dec, py_dec)


def corpus_texts() -> list[str]:
    """Every sentence of the shipped corpus, both languages, each distinct one once."""
    return sorted({t for s in SPLITS for p in load_tatoeba(s) for t in (p.ja, p.en)})


def random_char(rng: random.Random) -> str:
    first, last = rng.choice(POOLS[rng.choice(list(POOLS))])
    return chr(rng.randint(first, last))


def random_text(rng: random.Random, corpus: list[str], pieces: list[str]) -> str:
    """Random characters; a corpus sentence with edits; or vocabulary pieces glued."""
    kind = rng.randrange(3)
    if kind == 0:
        out = []
        for _ in range(rng.randint(0, 24)):
            out.append(
                random_char(rng) * (rng.randint(2, 5) if rng.random() < 0.2 else 1)
            )
        return "".join(out)
    if kind == 1:
        text = rng.choice(corpus)
        if rng.random() < 0.3:  # dakuten etc. as combining marks, to be recomposed
            text = unicodedata.normalize(rng.choice(["NFD", "NFKD"]), text)
        if rng.random() < 0.3:  # full-width ASCII
            text = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)
        chars = list(text)
        for _ in range(rng.randint(0, 3)):
            at = rng.randint(0, len(chars))
            new = random_char(rng) if rng.random() < 0.7 else " " * rng.randint(1, 4)
            chars[at : at + rng.randint(0, 1)] = [new]
        return "".join(chars)
    glued = [
        rng.choice(pieces).replace("\u2581", " ") for _ in range(rng.randint(1, 8))
    ]
    return " " * rng.randint(0, 2) + "".join(glued)


def random_ids(rng: random.Random, n: int, byte_ids: list, special: list) -> list[int]:
    """Random ids of n pieces, rich in byte pieces (valid UTF-8 and not), controls,
    <unk>, "▁"; rarely one out of range."""
    out = []
    for _ in range(rng.randint(0, 12)):
        r = rng.random()
        if r < 0.4:
            out.append(rng.randrange(n))
        elif r < 0.6:
            out.extend(rng.choice(byte_ids) for _ in range(rng.randint(1, 4)))
        elif r < 0.8:  # one character as its UTF-8 bytes, maybe cut short
            utf8 = random_char(rng).encode("utf-8", "replace")
            out.extend(byte_ids[b] for b in utf8[: rng.randint(1, len(utf8))])
        else:
            out.append(rng.choice(special))
    if rng.random() < 0.01:
        out.insert(rng.randint(0, len(out)), rng.choice([-1, n, n + 7]))
    return out


@pytest.fixture(scope="module")
def model() -> bytes:
    return _corpus_bytes(SPM_FILE)


@pytest.fixture(scope="module")
def sp(model) -> spm.SentencePieceProcessor:
    return spm.SentencePieceProcessor(model_proto=model)


@pytest.fixture(scope="module")
def vocab(model) -> dict:
    return spm_vocab(model)


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    return corpus_texts()


@pytest.fixture(scope="module")
def random_inputs(corpus, sp) -> tuple[list[str], list[list[int]]]:
    rng = random.Random(SEED)
    pieces = [
        sp.id_to_piece(i)
        for i in range(sp.get_piece_size())
        if not (sp.is_byte(i) or sp.is_control(i) or sp.is_unknown(i))
    ]
    texts = TRICKY + [random_text(rng, corpus, pieces) for _ in range(N_RANDOM)]
    n = sp.get_piece_size()
    byte_ids = [i for i in range(n) if sp.is_byte(i)]
    special = [i for i in range(n) if sp.is_control(i) or sp.is_unknown(i)]
    return texts, [random_ids(rng, n, byte_ids, special) for _ in range(N_RANDOM)]


def test_every_corpus_sentence_equals_python(vocab, sp, corpus, tmp_path):
    assert len(corpus) > 300_000  # all splits, both languages (distinct sentences)
    bad, _ = compare(vocab, sp, corpus, [], tmp_path)
    assert not bad, f"{len(bad)} of {len(corpus)} sentences differ: {bad[:3]}"


def test_random_strings_and_ids_equal_python(vocab, sp, random_inputs, tmp_path):
    texts, id_lists = random_inputs
    assert any(0xD800 <= ord(c) <= 0xDFFF for t in texts for c in t)  # surrogates
    assert any(len(sp.encode(as_python_text(t), out_type=str)) == 0 for t in texts)
    bad_text, bad_ids = compare(vocab, sp, texts, id_lists, tmp_path)
    assert not bad_text, f"{len(bad_text)} of {len(texts)} differ: {bad_text[:3]}"
    assert not bad_ids, f"{len(bad_ids)} of {len(id_lists)} differ: {bad_ids[:3]}"


def test_every_code_point_equals_python(vocab, sp, tmp_path):
    """All 1,112,064 scalar values (and the 2,048 lone surrogates), 16 in a string."""
    code_points = list(range(0x110000))
    texts = ["".join(map(chr, code_points[i : i + 16])) for i in range(0, 0x110000, 16)]
    bad, _ = compare(vocab, sp, texts, [], tmp_path)
    assert not bad, f"{len(bad)} of {len(texts)} differ: {bad[:3]}"


IN_PAGE = """async (job) => {
  const { texts, ids } = JSON.parse(job);  // JSON keeps unpaired surrogates as they are
  const { loadSentencePiece } = await import("./spm.js");
  const sp = await loadSentencePiece("./vocab.json");
  const encoded = texts.map((text) => {
    const { pieces, ids } = sp.encode(text);
    return [pieces, ids, sp.decode(ids), sp.normalize(text)];
  });
  const decoded = ids.map((list) => {
    try { return sp.decode(list); } catch (e) { return { error: e.name }; }
  });
  return [encoded, decoded];
}"""


def test_in_chromium_equals_python(vocab, sp, random_inputs, browser, tmp_path):
    """The module as a page imports it (served, fetched, run by Chromium's V8)."""
    from static_server import serve  # book/ is on pythonpath

    texts, id_lists = random_inputs[0][:5000], random_inputs[1][:5000]
    shutil.copy(SPM_JS, tmp_path / "spm.js")
    (tmp_path / "vocab.json").write_text(json.dumps(vocab), encoding="utf8")
    (tmp_path / "index.html").write_text("<!doctype html><title>spm.js</title>")
    with serve(tmp_path) as base:
        tab = browser.new_page()
        try:
            tab.goto(f"{base}index.html")
            job = json.dumps({"texts": texts, "ids": id_lists})
            js_enc, js_dec = tab.evaluate(IN_PAGE, job)
        finally:
            tab.close()
    py_enc, py_dec = run_python(sp, texts, id_lists)
    bad_text = mismatches(texts, js_enc, py_enc)
    bad_ids = mismatches(id_lists, js_dec, py_dec)
    assert not bad_text, f"{len(bad_text)} of {len(texts)} differ: {bad_text[:3]}"
    assert not bad_ids, f"{len(bad_ids)} of {len(id_lists)} differ: {bad_ids[:3]}"


def variant(model: bytes, **flags) -> bytes:
    """The model with other normaliser (or trainer) flags. Without byte fallback the
    byte pieces become unused ones (sentencepiece refuses byte pieces then)."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model)
    for name, value in flags.items():
        spec = proto.trainer_spec if name == "byte_fallback" else proto.normalizer_spec
        setattr(spec, name, value)
    if not proto.trainer_spec.byte_fallback:
        for piece in proto.pieces:
            if piece.type == piece.BYTE:
                piece.type = piece.UNUSED
    return proto.SerializeToString()


@pytest.mark.parametrize(
    "flags",
    [
        {"add_dummy_prefix": False},
        {"remove_extra_whitespaces": False},
        {"escape_whitespaces": False},
        {"byte_fallback": False},  # a run of unknown characters: one <unk>
        {"add_dummy_prefix": False, "remove_extra_whitespaces": False},
    ],
    ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()),
)
def test_other_normaliser_flags_equal_python(
    model, corpus, random_inputs, flags, tmp_path
):
    other = variant(model, **flags)
    texts = random_inputs[0][:3000] + corpus[::300]
    id_lists = random_inputs[1][:3000]
    sp = spm.SentencePieceProcessor(model_proto=other)
    bad_text, bad_ids = compare(spm_vocab(other), sp, texts, id_lists, tmp_path)
    assert not bad_text, f"{len(bad_text)} of {len(texts)} differ: {bad_text[:3]}"
    assert not bad_ids, f"{len(bad_ids)} of {len(id_lists)} differ: {bad_ids[:3]}"


def test_a_wrong_normaliser_is_caught(vocab, sp, random_inputs, tmp_path):
    """Without the charsmap (normalising nothing) spm.js must disagree: the
    comparison above can fail."""
    wrong = {**vocab, "normalizer": {**vocab["normalizer"], "precompiled_charsmap": ""}}
    texts = ["ｱｲｳ", "ＡＢＣ１２３", "私は\u3000太郎です", "a\u200bb"] + random_inputs[0]
    bad, _ = compare(wrong, sp, texts, [], tmp_path)
    assert {t for t, _, _ in bad} >= set(texts[:4])
    assert len(bad) > len(texts) // 10


def test_javascripts_nfkc_is_not_the_models_normaliser(model, tmp_path):
    """String.prototype.normalize("NFKC") differs from the charsmap: it keeps control
    characters and odd spaces, turns "～" into "~", and reorders and composes any run
    of combining marks (the charsmap maps sequences of at most a few characters)."""
    bare = variant(
        model,
        add_dummy_prefix=False,
        remove_extra_whitespaces=False,
        escape_whitespaces=False,
    )
    sequences = ["た\u0650\u3099", "a\u033a\u3099"]  # NFKC: "だ\u0650", "a\u3099\u033a"
    texts = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF] + sequences
    rows, _ = run_js(spm_vocab(bare), texts, [], tmp_path, nfkc=True)
    differ = {t for t, (ours, nfkc) in zip(texts, rows, strict=True) if ours != nfkc}
    assert {"\x01", "\t", "\u200b", "\ufeff", "\uff5e", *sequences} <= differ
    assert "ｱ" not in differ and "Ａ" not in differ and "㍻" not in differ  # both map


def test_vocab_file_keeps_every_score_and_the_charsmap(model, tmp_path):
    from sentencepiece import sentencepiece_model_pb2

    path = write_spm_vocab(
        Path(transformer_edu.__file__).parent / "tatoeba" / "corpus" / SPM_FILE,
        tmp_path / "spm.json",
    )
    vocab = json.loads(path.read_text(encoding="utf8"))
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model)
    assert vocab["pieces"] == [p.piece for p in proto.pieces]
    assert vocab["types"] == "".join(str(p.type) for p in proto.pieces)
    f32 = [float32_text(p.score) for p in proto.pieces]  # what the file says
    assert vocab["scores"] == f32
    assert [float32_text(s) for s in vocab["scores"]] == f32  # it reads back the same
    assert vocab["unk_id"] == 3 and vocab["byte_fallback"] is True


def test_float32_text_reads_back_as_the_same_float32():
    import struct

    rng = random.Random(SEED)
    for _ in range(10_000):
        bits = rng.getrandbits(32)
        (x,) = struct.unpack("<f", struct.pack("<I", bits))
        if x != x or abs(x) == float("inf"):
            continue
        text = float32_text(x)
        assert struct.unpack("<f", struct.pack("<f", text))[0] == x, (bits, text)


def test_a_model_spm_js_cannot_run_is_refused(model):
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model)
    proto.trainer_spec.model_type = proto.trainer_spec.BPE
    with pytest.raises(ValueError, match="model_type=BPE"):
        spm_vocab(proto.SerializeToString())
