"""The Tatoeba recipe's run-to-run spread: the shipped recipe trained with several seeds
for the same number of steps, each scored on dev and test.

    python scripts/record_tatoeba_seeds.py --seeds 1 2 3 --steps 1200
    python scripts/record_tatoeba_seeds.py --seeds 1 2 3 --steps 1200 --folder runs/

Each seed trains with the command that trained the shipped model (``python -m
transformer_edu train --corpus tatoeba``), its ``--max-steps`` set so that the learning
rate's schedule follows steps, not the clock (runs slowed by other work on the machine
still train alike), into ``FOLDER/seedN.pt``; a checkpoint already there is scored,
not trained again. Each is decoded greedily on dev and test and scored with BLEU and
chrF (sacreBLEU's 95 % bootstrap intervals). The record,
``transformer_edu/tatoeba/weights/tatoeba_seeds.json``, holds the scores, each run's training
history summary and its test outputs (CI recomputes the scores from them:
tests/tatoeba/test_shipped_model.py). Chapter 12 sets the spread between the seeds beside the
gap between the shipped model and the one before it.

At 1,200 steps a seed takes about 20 minutes on 2 CPU cores (the shipped model trained
5,819 steps): the spread measured is that of shorter runs than the shipped one.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from record_tatoeba_scores import score_row  # scripts/ is on sys.path when run

from transformer_edu.devices import describe_device
from transformer_edu.seeds import spread
from transformer_edu.tatoeba.checkpoint import load_tatoeba_checkpoint
from transformer_edu.tatoeba.data import load_tatoeba
from transformer_edu.tatoeba.translate import translate_batch

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "transformer_edu" / "tatoeba" / "weights" / "tatoeba_seeds.json"


def train(seed: int, steps: int, path: Path) -> None:
    """One run of the shipped recipe, as its command line trains it."""
    command = [
        sys.executable, "-m", "transformer_edu", "train", "--corpus", "tatoeba",
        "--minutes", "600", "--max-steps", str(steps), "--seed", str(seed),
        "--quiet", "--checkpoint", str(path),
    ]  # fmt: skip
    print(" ".join(command[1:]), flush=True)
    subprocess.run(command, check=True)


def score(path: Path) -> dict:
    """Greedy outputs on dev and test, scored; the run's training summary."""
    model, tok, meta = load_tatoeba_checkpoint(path)
    row: dict = {
        "seed": meta["seed"], "steps": meta["steps"],
        "minutes_taken": meta["minutes_taken"], "machine": meta["machine"],
        "autocast": meta["autocast"], "commit": meta["commit"],
        "dev_bleu_500": round(meta["history"]["final_bleu"], 2),
    }  # fmt: skip
    for split in ("dev", "test"):
        pairs = load_tatoeba(split)
        hyps = translate_batch(model, tok, [p.ja for p in pairs], 1, 0.0)
        row[split] = score_row(hyps, [p.en for p in pairs])
        if split == "test":
            row["test_outputs"] = hyps
        print(f"seed {row['seed']}, {split}: BLEU {row[split]['bleu']['score']:.2f} "
              f"± {row[split]['bleu']['ci']:.2f}", flush=True)  # fmt: skip
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--folder", help="where the runs' checkpoints go (default: temp)")
    args = ap.parse_args(argv)
    folder = Path(args.folder or tempfile.mkdtemp(prefix="tatoeba_seeds_"))
    folder.mkdir(parents=True, exist_ok=True)
    runs = []
    for seed in args.seeds:
        path = folder / f"seed{seed}.pt"
        if not path.exists():
            train(seed, args.steps, path)
        runs.append(score(path))
        if runs[-1]["steps"] != args.steps or runs[-1]["seed"] != seed:
            raise SystemExit(f"{path}: seed {runs[-1]['seed']}, {runs[-1]['steps']} "
                             f"steps; expected seed {seed}, {args.steps} steps")  # fmt: skip
    test = [r["test"]["bleu"]["score"] for r in runs]
    record = {
        "what": "The shipped Tatoeba recipe trained with several seeds for the same "
        "number of steps; greedy BLEU and chrF on dev and test, each with sacreBLEU's "
        "95 % bootstrap interval (which covers the draw of test sentences, not the run)",
        "command": "python scripts/record_tatoeba_seeds.py --seeds "
        + " ".join(map(str, args.seeds)) + f" --steps {args.steps}",
        "steps": args.steps, "seeds": args.seeds, "torch": str(torch.__version__),
        "scored_on": describe_device(torch.device("cpu")),
        "test_bleu_spread": round(spread(test), 2),
        "runs": runs,
    }  # fmt: skip
    RECORD.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    print(f"test BLEU {', '.join(f'{t:.2f}' for t in test)}: spread "
          f"{record['test_bleu_spread']:.2f}; wrote {RECORD}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
