"""Choose the shipped Tatoeba model's decoding on the dev split, as the paper did (§6.1).

    python scripts/sweep_tatoeba_decoding.py   # -> transformer_edu/tatoeba/weights/
                                               #      tatoeba_ja_en.sweep.json

Beam sizes 1 (greedy), 2, 4, 8, 16, each with the length penalty α from 0 to 2
(``ALPHAS``; greedy has no α; beams 8 and 16 stop at ``WIDE_ALPHA_MAX``): BLEU, chrF and length ratio (output words / reference
words) of every dev sentence's output. The setting with the highest dev BLEU is chosen
if it beats greedy, or the narrowest beam's best setting where a paired test on dev
cannot tell the two apart (``NOISE_P``); then it becomes ``tatoeba.translate.DEFAULT_BEAM`` / ``DEFAULT_ALPHA``
(set them by hand; a test holds them equal to this record), and the test split is
scored with it once (``scripts/record_tatoeba_outputs.py``, then
``scripts/record_tatoeba_scores.py``). ``--resume LOG`` takes the settings already
measured from the lines an earlier run printed (same model), and runs the rest. The sweep also shows the *beam curse*: without
a penalty (α = 0) a wider beam finds outputs that are more probable, and shorter.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

from transformer_edu.devices import describe_machine
from transformer_edu.metrics import bleu, chrf, length_ratio, paired_bootstrap
from transformer_edu.tatoeba.analysis import decoding_name, narrowest_within_noise
from transformer_edu.tatoeba.checkpoint import (
    load_tatoeba_checkpoint,
    shipped_model_path,
)
from transformer_edu.tatoeba.data import load_tatoeba
from transformer_edu.tatoeba.translate import translate_batch

ROOT = Path(__file__).resolve().parents[1]
BEAMS = (1, 2, 4, 8, 16)
ALPHAS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0)
# Beams 8 and 16 stop here: for beams 2 and 4, alpha 1.75 and 2 lost 4.5 to 13 dev BLEU (the
# outputs run on towards the length limit), and each took 10-30 times greedy's time
WIDE_ALPHA_MAX = 1.5
# A wider beam that beats a narrower one by less than a paired test on dev can tell
# from noise (sacreBLEU's paired bootstrap, p >= NOISE_P) does not earn its cost
NOISE_P = 0.05


def alphas_of(beam: int) -> tuple[float, ...]:
    if beam == 1:
        return (0.0,)
    return ALPHAS if beam < 8 else tuple(a for a in ALPHAS if a <= WIDE_ALPHA_MAX)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--limit", type=int, help="only the first N dev pairs (a trial)")
    p.add_argument(
        "--resume", type=Path, help="rows an earlier run printed (JSON lines)"
    )
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    model, tok, meta = load_tatoeba_checkpoint()
    pairs = load_tatoeba("dev")[: args.limit]
    sources, refs = [q.ja for q in pairs], [q.en for q in pairs]
    done = {}
    if args.resume:
        for line in args.resume.read_text().splitlines():
            if line.startswith("{"):
                row = json.loads(line)
                done[(row["beam"], row["alpha"])] = row
    rows, outputs = [], {}
    for beam in BEAMS:
        for alpha in alphas_of(beam):
            if (beam, alpha) in done:
                rows.append(done[(beam, alpha)])
                continue
            start = time.perf_counter()
            hyps = translate_batch(model, tok, sources, beam, alpha)
            seconds = time.perf_counter() - start
            outputs[(beam, alpha)] = hyps
            rows.append({"beam": beam, "alpha": alpha,
                         "bleu": round(bleu(hyps, refs).score, 2),
                         "chrf": round(chrf(hyps, refs).score, 2),
                         "length_ratio": round(length_ratio(hyps, refs), 4),
                         "seconds": round(seconds, 1)})  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    greedy = rows[0]
    best = max(rows, key=lambda r: (r["bleu"], -r["beam"]))  # ties: the narrower

    def hyps_of(r: dict) -> list[str]:
        k = (r["beam"], r["alpha"])
        if k not in outputs:  # measured by the run resumed
            outputs[k] = translate_batch(model, tok, sources, *k)
        return outputs[k]

    # a wider beam costs more: the narrowest beam whose best setting a paired test on
    # dev cannot tell from the best one (p >= NOISE_P) is chosen in its place
    rivals = []
    for k in BEAMS[1:]:
        top = max((r for r in rows if r["beam"] == k), key=lambda r: r["bleu"])
        if top is not best and hyps_of(top) != hyps_of(best):
            p_value = paired_bootstrap(hyps_of(best), hyps_of(top), refs)[
                "BLEU"
            ].p_value
        else:
            p_value = 1.0
        rivals.append({**top, "p_value_against_best": round(p_value, 4)})
    narrow = narrowest_within_noise(rivals, NOISE_P)
    if best is not greedy and narrow["bleu"] > greedy["bleu"]:
        best = {k: v for k, v in narrow.items() if k != "p_value_against_best"}
    # greedy wins: it is the default, and α is the best beam's (for --beam K alone)
    best_beam = max(rows[1:], key=lambda r: (r["bleu"], -r["beam"]))
    chosen = best if best is not greedy else {**greedy, "alpha": best_beam["alpha"]}
    key = (chosen["beam"], chosen["alpha"])
    hyps_key = key if key[0] > 1 else (1, 0.0)
    for b, a in {(1, 0.0), hyps_key}:  # the paired test below needs both
        hyps_of({"beam": b, "alpha": a})
    out = {
        "command": "python scripts/sweep_tatoeba_decoding.py"
        + (f" --limit {args.limit}" if args.limit else "")
        + (" --resume (the rows of an earlier run of the same model)" if done else ""),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                 capture_output=True, text=True).stdout.strip(),
        "machine": describe_machine(),
        "torch": torch.__version__,
        "model": shipped_model_path().name, "trained_at": meta.get("commit"),
        "split": "dev", "pairs": len(pairs), "beams": list(BEAMS),
        "alphas": list(ALPHAS), "wide_alpha_max": WIDE_ALPHA_MAX,
        "rule": "the highest dev BLEU, if above greedy's; then the narrowest beam "
        f"whose best dev BLEU a paired test cannot tell from it (p >= {NOISE_P})",
        "dev": rows,
        "noise_p": NOISE_P,
        "narrowest_within_noise": rivals,
        "chosen": {"name": decoding_name(*key), **chosen},
    }  # fmt: skip
    if hyps_key != (1, 0.0):
        test = paired_bootstrap(outputs[(1, 0.0)], outputs[hyps_key], refs)["BLEU"]
        out["chosen"]["dev_paired_p_value"] = round(test.p_value, 4)
    path = shipped_model_path().with_suffix(".sweep.json")
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {path}; chosen: {out['chosen']['name']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
