"""The Tatoeba model's checkpoint: the shipped one (``weights/``) and what ``train
--corpus tatoeba`` writes. Weights in float16, the configuration, the SentencePiece
model's SHA-256 (a checkpoint loads only with the tokenizer it was trained with) and
how it was trained; the file itself is written and read by ``toy.checkpoint`` (one
writer for both tasks)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import torch

from ..model.transformer import Transformer
from .data import SubwordTokenizer, default_tokenizer

FORMAT = "transformer_edu.tatoeba"  # the format's name, kept when the module moved
VERSION = 1


def shipped_model_path() -> Path:
    return Path(__file__).parent / "weights" / "tatoeba_ja_en.pt"


def save_tatoeba_checkpoint(
    path: str | Path,
    model: Transformer,
    tok: SubwordTokenizer,
    meta: dict | None = None,
) -> Path:
    """Config, weights in float16 (half the bytes; loaded back as float32), the
    SentencePiece model's SHA-256, and ``meta`` (how it was trained)."""
    from ..toy.checkpoint import write_checkpoint_file

    # a tied weight is one tensor under several names: convert it once, so that
    # torch.save stores one copy. Recognise it by the model's own tensor (its device
    # and address), never by a copy: on a GPU `.cpu()` returns a fresh copy whose
    # memory the allocator hands to the next copy, and two weights would then look tied
    state, halves = {}, {}
    for k, v in model.state_dict().items():
        v = v.detach()
        if v.is_floating_point():
            key = (v.device, v.data_ptr(), tuple(v.shape), v.stride())
            if key not in halves:
                halves[key] = v.cpu().half()
            state[k] = halves[key]
        else:
            state[k] = v.cpu()
    blob = {
        "format": FORMAT, "version": VERSION, "config": model.config.to_dict(),
        "spm_sha256": hashlib.sha256(tok.model_proto).hexdigest(),
        "state_dict": state, "meta": meta or {},
    }  # fmt: skip
    return write_checkpoint_file(blob, path)


def load_tatoeba_checkpoint(
    path: str | Path | None = None, device: str | torch.device = "cpu"
) -> tuple[Transformer, SubwordTokenizer, dict[str, Any]]:
    """The shipped model (``path=None``) or one written by ``train --corpus tatoeba``.

    Raises CheckpointError for a missing, corrupt or mismatched file.
    """
    from ..toy.checkpoint import (
        CheckpointError,
        build_model_from_state,
        read_checkpoint_file,
    )

    path = Path(path) if path else shipped_model_path()
    blob = read_checkpoint_file(path, FORMAT, VERSION, {"config", "state_dict"},
                                "Tatoeba checkpoint")  # fmt: skip
    tok = default_tokenizer()
    if blob.get("spm_sha256") != hashlib.sha256(tok.model_proto).hexdigest():
        raise CheckpointError(
            f"{path} was trained with another SentencePiece model than the shipped one"
        )
    state = {k: v.float() if v.is_floating_point() else v
             for k, v in blob["state_dict"].items()}  # fmt: skip
    model = build_model_from_state(blob.get("config"), state, path)
    if model.config.src_vocab_size != len(tok):
        raise CheckpointError(
            f"{path}: vocabulary size {model.config.src_vocab_size}, the tokenizer "
            f"has {len(tok)}"
        )
    return model.to(device).eval(), tok, dict(blob.get("meta", {}))


def default_tatoeba_checkpoint_path() -> Path:
    """Where ``train --corpus tatoeba`` writes: ~/.cache/transformer_edu/tatoeba_ja_en.pt
    (``$XDG_CACHE_HOME`` respected); the shipped model is never overwritten."""
    from ..toy.checkpoint import cache_dir

    return cache_dir() / "tatoeba_ja_en.pt"
