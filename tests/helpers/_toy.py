"""A tiny model trained for a few seconds, shared by the decoding/checkpoint/CLI tests."""

from __future__ import annotations

import functools

import torch

from transformer_edu.model.transformer import make_model
from transformer_edu.toy.data import build_vocabs, load_corpus
from transformer_edu.toy.training import TrainConfig, train

SMALL = dict(n_layers=1, d_model=32, n_heads=4, d_ff=64, dropout=0.0, max_len=32)


@functools.cache
def tiny_trained():
    """(model, src_vocab, tgt_vocab, history, pairs): 150 short pairs, a few seconds."""
    pairs = [p for p in load_corpus("train") if len(p.src) <= 6][:150]
    sv, tv = build_vocabs(load_corpus("train"))
    torch.manual_seed(0)
    model = make_model(len(sv), len(tv), **SMALL)
    cfg = TrainConfig(epochs=25, batch_size=32, warmup=50, lr_factor=0.5, device="cpu")
    hist = train(model, pairs, sv, tv, cfg, progress=False)
    return model, sv, tv, hist, pairs
