"""Translate the dev and test splits with a Tatoeba model and record the outputs.

    python scripts/record_tatoeba_outputs.py
        # the shipped model -> transformer_edu/tatoeba/weights/tatoeba_ja_en.outputs.json
    python scripts/record_tatoeba_outputs.py --commit c73b6fe --name v2
        # the model shipped at that commit (v2), with that commit's SentencePiece model
        # and training split -> transformer_edu/tatoeba/weights/tatoeba_ja_en.v2.outputs.json

The dev and test pairs are those of the corpus that ships now, whichever model
translates them: the split keeps every one of them out of both models' training
(scripts/prepare_tatoeba.py), so two models' outputs compare on pairs neither trained
on. Each decoding (greedy, the one chosen on dev: ``tatoeba.translate.DEFAULT_BEAM`` /
``DEFAULT_ALPHA``, and the paper's beam 4, α 0.6) is recorded for both splits.

Beside the outputs, what depends on the model's own training split (the corpus at
``--commit``, or the one shipped now): which references occur verbatim in its training
English (``en_in_train``; none for a model trained on the split of now), which outputs
do (``in_train``), and the words of each output that its training English never has
(``unseen``). The scores, intervals and tests are computed from these records by
``scripts/record_tatoeba_scores.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from transformer_edu.devices import describe_machine
from transformer_edu.tatoeba.analysis import decoding_name, unseen_words, vocabulary
from transformer_edu.tatoeba.checkpoint import (
    FORMAT,
    VERSION,
    load_tatoeba_checkpoint,
    shipped_model_path,
)
from transformer_edu.tatoeba.data import SubwordTokenizer, TatoebaPair, load_tatoeba
from transformer_edu.tatoeba.translate import (
    DEFAULT_ALPHA,
    DEFAULT_BEAM,
    translate_batch,
)
from transformer_edu.toy.checkpoint import build_model_from_state, read_checkpoint_file

ROOT = Path(__file__).resolve().parents[1]
PAPER = (4, 0.6)  # the paper's beam size and length penalty (§6.1)
SPLITS = ("dev", "test")


def git(*args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=ROOT, check=True,
                          capture_output=True).stdout  # fmt: skip


def shipped_at(commit: str, path: str) -> bytes:
    """File ``path`` (under transformer_edu/) as ``commit`` shipped it: commits before
    the package took folders hold it at its old place (``OLD_PLACES``)."""
    try:
        return git("show", f"{commit}:transformer_edu/{path}")
    except subprocess.CalledProcessError:
        return git("show", f"{commit}:transformer_edu/{OLD_PLACES[path]}")


OLD_PLACES = {
    "tatoeba/corpus/tatoeba_spm.model": "corpus/tatoeba_spm.model",
    "tatoeba/corpus/tatoeba.tsv.xz": "corpus/tatoeba.tsv.xz",
    "tatoeba/weights/tatoeba_ja_en.pt": "models/tatoeba_ja_en.pt",
}


def model_at(commit: str):
    """The model, tokenizer and meta shipped at ``commit``, and its training pairs."""
    spm = shipped_at(commit, "tatoeba/corpus/tatoeba_spm.model")
    tok = SubwordTokenizer(spm)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.pt"
        path.write_bytes(shipped_at(commit, "tatoeba/weights/tatoeba_ja_en.pt"))
        blob = read_checkpoint_file(path, FORMAT, VERSION, {"config", "state_dict"})
    if blob.get("spm_sha256") != hashlib.sha256(spm).hexdigest():
        raise SystemExit(f"{commit}: the model was not trained with that commit's spm")
    state = {k: v.float() if v.is_floating_point() else v
             for k, v in blob["state_dict"].items()}  # fmt: skip
    model = build_model_from_state(blob["config"], state, f"{commit}:tatoeba_ja_en.pt")
    corpus = lzma.decompress(shipped_at(commit, "tatoeba/corpus/tatoeba.tsv.xz"))
    train = []
    for line in corpus.decode("utf-8").splitlines()[1:]:
        split, sid, ja, en = line.split("\t")
        if split == "train":
            train.append(TatoebaPair(int(sid), ja, en))
    return model.eval(), tok, dict(blob.get("meta", {})), train


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--commit", help="the model shipped at this commit (default: now)")
    p.add_argument("--name", help="record as tatoeba_ja_en.NAME.outputs.json")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--decoding", action="append", metavar="BEAM,ALPHA",
                   help="only this decoding (repeatable); the record's others of the "
                   "same model are kept. Default: greedy, the chosen one, the paper's")  # fmt: skip
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.commit:
        model, tok, meta, train = model_at(args.commit)
    else:
        model, tok, meta = load_tatoeba_checkpoint()
        train = load_tatoeba("train")
    train_en = {t.en for t in train}
    known = vocabulary(train_en)
    pairs = {s: load_tatoeba(s) for s in SPLITS}
    decodings = list(dict.fromkeys([(1, 0.0), (DEFAULT_BEAM, DEFAULT_ALPHA), PAPER]))
    if args.decoding:
        decodings = [
            (int(b), float(a)) for b, a in (d.split(",") for d in args.decoding)
        ]
    out = {
        "model": {"commit": args.commit, "trained_by": meta.get("command"),
                  "trained_at": meta.get("commit"),
                  "spm_sha256": hashlib.sha256(tok.model_proto).hexdigest()},
        "splits": {s: {"ids": [q.id for q in pairs[s]],
                       "en_in_train": [i for i, q in enumerate(pairs[s])
                                       if q.en in train_en]}
                   for s in SPLITS},
        "decodings": [],
    }  # fmt: skip
    stem = shipped_model_path().with_suffix("")
    path = stem.with_name(stem.name + (f".{args.name}" if args.name else "")
                          + ".outputs.json")  # fmt: skip
    kept = []
    if args.decoding and path.is_file():  # keep the other decodings of this model
        old = json.loads(path.read_text(encoding="utf-8"))
        if old["model"] == out["model"] and old["splits"] == out["splits"]:
            names = {decoding_name(b, a) for b, a in decodings}
            kept = [d for d in old["decodings"] if d["name"] not in names]
    for beam, alpha in decodings:
        row = {"name": decoding_name(beam, alpha), "beam": beam, "alpha": alpha,
               "command": " ".join(["python scripts/record_tatoeba_outputs.py",
                                    *sys.argv[1:]]),
               "written_at": git("rev-parse", "--short", "HEAD").decode().strip(),
               "machine": describe_machine(),
               "torch": torch.__version__}  # fmt: skip
        for s in SPLITS:
            start = time.perf_counter()
            hyps = translate_batch(model, tok, [q.ja for q in pairs[s]], beam, alpha)
            row[f"{s}_seconds"] = round(time.perf_counter() - start, 1)
            row[s] = hyps
            row[f"{s}_in_train"] = [i for i, h in enumerate(hyps) if h in train_en]
            row[f"{s}_unseen"] = {str(i): w for i, h in enumerate(hyps)
                                  if (w := unseen_words(h, known))}  # fmt: skip
            print(f"{row['name']}, {s}: {len(hyps)} sentences in "
                  f"{row[f'{s}_seconds']} s", flush=True)  # fmt: skip
        out["decodings"].append(row)
    out["decodings"] = sorted(kept + out["decodings"],
                              key=lambda d: (d["beam"], d["alpha"]))  # fmt: skip
    path.write_text(json.dumps(out, ensure_ascii=False, indent=0) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
