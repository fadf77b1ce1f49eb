"""Run by tests/tatoeba/test_ddp.py on each of 2 ranks under torchrun (gloo, CPU):

    python -m torch.distributed.run --nproc_per_node=2 --standalone \\
        tests/helpers/ddp_worker.py OUT_DIR

1. ``train_tatoeba`` on a tiny model for a few steps; rank 0 writes the history to
   OUT_DIR/ddp.json (the test compares its losses with one process).
2. ``python -m transformer_edu train --corpus tatoeba`` (its ``main``), with the model
   sizes and the corpus made tiny; each rank's stdout goes to OUT_DIR/stdout<rank>.txt
   and each call of the checkpoint writer leaves OUT_DIR/saved_by_rank<rank>.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import torch.distributed as dist

from transformer_edu.tatoeba import checkpoint as ck
from transformer_edu.tatoeba import train as tt
from transformer_edu.tatoeba.data import default_tokenizer, load_tatoeba
from transformer_edu.tatoeba.recipe import TATOEBA_MODEL, TatoebaTrainConfig

# dropout 0: the ranks' dropout masks cannot equal one process's
DDP_MODEL = dict(d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1,
                 n_decoder_layers=1, dropout=0.0)  # fmt: skip
STEPS = 4


def pairs():
    """Short train pairs (several batches of ``config().max_tokens`` a rank) and dev."""
    train = [p for p in load_tatoeba("train") if len(p.ja) <= 8][:600]
    dev = [p for p in load_tatoeba("dev") if len(p.ja) <= 8][:8]
    return train, dev


def config(**overrides) -> TatoebaTrainConfig:
    # float32 (no bf16 autocast): two ranks must give one process's losses exactly
    fields = dict(max_tokens=300, max_steps=STEPS, warmup=10, lr_factor=1.0,
                  eval_minutes=100, device="cpu", autocast=None)  # fmt: skip
    return TatoebaTrainConfig(**{**fields, **overrides})


def main(out: Path) -> None:
    tok = default_tokenizer()
    train, dev = pairs()
    model = tt.build_tatoeba_model(tok, seed=0, **DDP_MODEL)
    _, hist = tt.train_tatoeba(model, config(), tok, train, [], progress=False)
    rank = dist.get_rank()
    if rank == 0:
        (out / "ddp.json").write_text(json.dumps(hist.to_dict()))

    # the CLI, made small: the shipped sizes and corpus replaced by tiny ones
    from transformer_edu.cli import main as cli

    TATOEBA_MODEL.update(DDP_MODEL)
    tt.load_tatoeba = {"train": train, "dev": dev}.__getitem__
    save = ck.save_tatoeba_checkpoint

    def recording_save(*args, **kwargs):
        (out / f"saved_by_rank{rank}").touch()
        return save(*args, **kwargs)

    ck.save_tatoeba_checkpoint = recording_save
    argv = ["train", "--corpus", "tatoeba", "--max-steps", "2", "--quiet",
            "--checkpoint", str(out / "cli.pt")]  # fmt: skip
    with open(out / f"stdout{rank}.txt", "w") as f, contextlib.redirect_stdout(f):
        code = cli(argv)
    if code != 0:
        raise SystemExit(f"rank {rank}: the CLI exited with {code}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
