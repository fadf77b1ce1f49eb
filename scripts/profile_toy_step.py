"""Where one training step of the default toy model spends its time.

    python scripts/profile_toy_step.py [THREADS]

Two passes over the first 30 batches (batch 64) for each of: Adam as the trainer
uses it, fused Adam, fused Adam with bf16 autocast. Prints ms per step for the
forward pass, backward pass, gradient clipping and the optimizer step.
"""

from __future__ import annotations

import sys
import time

import torch

from transformer_edu.model.transformer import make_model
from transformer_edu.toy.data import batches, build_vocabs, load_corpus
from transformer_edu.toy.training import TOY_MODEL, sequence_loss


def main() -> None:
    torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
    pairs = load_corpus("train")
    sv, tv = build_vocabs(pairs)
    some = list(batches(pairs, sv, tv, 64, seed=1, sort_by_length=True))[:30]
    print(f"{torch.get_num_threads()} threads, {len(some)} batches x 2")
    for fused, bf16 in ((False, False), (True, False), (True, True)):
        torch.manual_seed(0)
        model = make_model(len(sv), len(tv), **TOY_MODEL).train()
        extra = {"fused": True} if fused else {}
        opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), **extra)
        t = dict.fromkeys(("forward", "backward", "clip", "adam"), 0.0)
        n = 0
        for _ in range(2):
            for b in some:
                t0 = time.perf_counter()
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                    logits = model(b.src, b.tgt_in)
                loss = sequence_loss(logits.float(), b.tgt_out, 0.1)
                t1 = time.perf_counter()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                t2 = time.perf_counter()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                t3 = time.perf_counter()
                opt.step()
                t4 = time.perf_counter()
                for k, dt in zip(t, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                    t[k] += dt
                n += 1
        parts = ", ".join(f"{k} {1e3 * v / n:.1f}" for k, v in t.items())
        total = 1e3 * sum(t.values()) / n
        print(f"fused Adam {fused!s:5} bf16 {bf16!s:5}: {total:.1f} ms/step ({parts})")


if __name__ == "__main__":
    main()
