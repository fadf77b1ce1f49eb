"""Chapter 11's last result over seeds: the solutions of A.2-A.5 and 10.1 train the
learner's model from scratch (cell ``a5-scratch``), once per seed, beside chapter 9's
``train`` from the same seed, so that the cell's asserts rest on more than one run.

    python scripts/scratch_seeds.py --seeds 0 1 2 3 4 5 6 7 8 9

A seed sets the initial weights and the order of the batches (``seed * 100_003 +
epoch``, as ``train`` orders them). The chapter's own cells run: the setup, the data
and the solutions, then ``a5-scratch`` with its seed put in. Prints one line per seed
(greedy exact match on the 200 probe pairs and the held-out pairs, the translation of
私は太郎です, the seconds) and the ranges; about 10 s a seed on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

CHAPTER = Path(__file__).resolve().parents[1] / "chapters" / "11_exercises.ipynb"
SOLUTIONS = ("lr_at_solution", "greedy_solution", "EncoderLayerSolution",
             "DecoderLayerSolution", "TransformerSolution", "train_loop_solution")  # fmt: skip


def _cells() -> dict[str, str]:
    cells = json.loads(CHAPTER.read_text(encoding="utf8"))["cells"]
    return {c["id"]: "".join(c["source"]) for c in cells if c["cell_type"] == "code"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    seeds = parser.parse_args().seeds
    cells = _cells()
    ns: dict = {}
    setup = next(s for s in cells.values() if "from transformer_edu import (" in s)
    exec(setup, ns)
    data = next(s for s in cells.values() if "SMALL_TRAINING = TrainConfig" in s)
    exec(data.split("model = fresh_model()")[0], ns)  # the pairs, not the zoo's model
    for name in SOLUTIONS:
        exec(next(s for s in cells.values() if f" {name}(" in s.split("\n")[0]), ns)
    ns["sizes"] = {k: ns["SMALL"][k] for k in ("d_model", "n_heads", "d_ff", "n_layers",
                                               "max_len")}  # fmt: skip
    ns["example"] = next(p for p in ns["train_pairs"] if p.ja == "私は太郎です")
    ns["ex_batch"] = ns["make_batch"]([ns["example"]], ns["src_vocab"], ns["tgt_vocab"])
    ns["probe"] = ns["small_train"][:200]
    scratch = cells["a5-scratch"].split("scratch_train = ")[0]
    assert "torch.manual_seed(0)" in scratch and "seed=e," in scratch
    rows = []
    for seed in seeds:
        torch = ns["torch"]
        torch.manual_seed(seed)
        zoo = ns["make_model"](
            len(ns["src_vocab"]), len(ns["tgt_vocab"]), **ns["SMALL"]
        )
        cfg = dataclasses.replace(ns["SMALL_TRAINING"], seed=seed)
        hist = ns["train"](zoo, ns["small_train"], ns["src_vocab"], ns["tgt_vocab"], cfg,
                           ns["small_test"], progress=False)  # fmt: skip
        exec(scratch.replace("torch.manual_seed(0)", f"torch.manual_seed({seed})")
             .replace("seed=e,", f"seed={seed} * 100_003 + e,"), ns)  # fmt: skip
        n = len(ns["probe"])
        row = (seed, sum(ns["hits"][:n]) / n, sum(ns["hits"][n:]) / (len(ns["hits"]) - n),
               hist.train_exact[-1], hist.eval_exact[-1], " ".join(ns["scratch_words"]),
               ns["scratch_seconds"])  # fmt: skip
        rows.append(row)
        print("seed {}: scratch probe {:.3f} held-out {:.3f}; train() train {:.3f} "
              "held-out {:.3f}; {!r}; {:.1f} s".format(*row), flush=True)  # fmt: skip
    for i, what in ((1, "scratch probe"), (2, "scratch held-out"),
                    (3, "train() train"), (4, "train() held-out")):  # fmt: skip
        values = [r[i] for r in rows]
        print(f"{what}: {min(values):.3f}-{max(values):.3f}")
    gaps = [abs(r[2] - r[4]) for r in rows]
    print(f"largest same-seed |held-out difference|: {max(gaps):.3f}")
    print(
        f"translated 私は太郎です as 'I am Taro': {sum(r[5] == 'I am Taro' for r in rows)}"
        f"/{len(rows)}"
    )


if __name__ == "__main__":
    main()
