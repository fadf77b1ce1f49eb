"""Checkpoints: one file with the config, both vocabularies and the weights."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import torch

from ..model.config import TransformerConfig
from ..model.transformer import Transformer, make_config
from .data import Vocab, load_corpus

FORMAT = "transformer_edu.checkpoint"  # the format's name, kept when the module moved
VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used, with the reason in the message."""


def cache_dir() -> Path:
    """Where the models this package trains go: ~/.cache/transformer_edu
    (``$XDG_CACHE_HOME`` respected)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "transformer_edu"


def default_checkpoint_path() -> Path:
    """$TRANSFORMER_EDU_CHECKPOINT, else ~/.cache/transformer_edu/toy_ja_en.pt; under a
    seed offset (``TEDU_SEED``, transformer_edu.seeds) the name says the offset
    (``toy_ja_en.seed100.pt``): the toy model trained under those seeds."""
    from ..seeds import seed_offset

    env = os.environ.get("TRANSFORMER_EDU_CHECKPOINT")
    path = Path(env).expanduser() if env else cache_dir() / "toy_ja_en.pt"
    offset = seed_offset()
    return path.with_name(f"{path.stem}.seed{offset}{path.suffix}") if offset else path


def write_checkpoint_file(blob: dict[str, Any], path: str | Path) -> Path:
    """``torch.save(blob)`` to ``path`` atomically: through a temporary file of this
    process, renamed, so that a reader never sees half a file (the toy's and the
    Tatoeba model's checkpoints)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f"{path.suffix}.{os.getpid()}.tmp")  # one per writer
    torch.save(blob, tmp)
    tmp.replace(path)
    return path


def corpus_fingerprint() -> str:
    """A short hash of the shipped corpus: a checkpoint trained on another is stale."""
    text = "\n".join(f"{p.ja}\t{p.en}" for p in load_corpus("train"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def save_checkpoint(
    path: str | Path,
    model: Transformer,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    meta: dict[str, Any] | None = None,
) -> Path:
    """Write model config, vocabularies, weights and ``meta`` to ``path`` (atomically)."""
    blob = {
        "format": FORMAT,
        "version": VERSION,
        "config": model.config.to_dict(),
        "src_vocab": src_vocab.to_dict(),
        "tgt_vocab": tgt_vocab.to_dict(),
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "meta": {"corpus": corpus_fingerprint(), **(meta or {})},
    }
    return write_checkpoint_file(blob, path)


def load_checkpoint(
    path: str | Path, device: str | torch.device = "cpu"
) -> tuple[Transformer, Vocab, Vocab, dict[str, Any]]:
    """Read a checkpoint written by ``save_checkpoint``; the model is in eval mode.

    Raises CheckpointError naming the problem: missing file, unreadable (corrupt) file,
    another format or version, or weights that do not fit the stored config.
    """
    path = Path(path)
    blob = read_checkpoint_file(
        path, FORMAT, VERSION, {"config", "src_vocab", "tgt_vocab", "state_dict"}
    )
    try:
        config = TransformerConfig.from_dict(blob["config"])
        src_vocab, tgt_vocab = (
            Vocab.from_dict(blob[k]) for k in ("src_vocab", "tgt_vocab")
        )
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: bad config or vocabulary: {e}") from e
    if (len(src_vocab), len(tgt_vocab)) != (
        config.src_vocab_size,
        config.tgt_vocab_size,
    ):
        raise CheckpointError(
            f"{path}: vocabularies of size {len(src_vocab)}/{len(tgt_vocab)} do not fit "
            f"the config's {config.src_vocab_size}/{config.tgt_vocab_size}"
        )
    model = build_model_from_state(blob["config"], blob["state_dict"], path)
    return model.to(device).eval(), src_vocab, tgt_vocab, dict(blob.get("meta", {}))


def read_checkpoint_file(
    path: Path, format: str, version: int, needs: set[str], what: str = "checkpoint"
) -> dict[str, Any]:
    """The dict saved at ``path``, checked: it exists, torch reads it (tensors and
    plain data only), its ``format`` and ``version`` are these, it has the ``needs``
    keys. CheckpointError otherwise; ``what`` names the kind in the message."""
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}")
    try:
        # TorchVersion: a meta may record torch.__version__ as it is
        with torch.serialization.safe_globals([torch.torch_version.TorchVersion]):
            blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many types for a damaged file
        raise CheckpointError(
            f"{path} is not a readable checkpoint ({e.__class__.__name__})"
        ) from e
    if not isinstance(blob, dict) or blob.get("format") != format:
        raise CheckpointError(f"{path} is not a transformer_edu {what}")
    if blob.get("version") != version:
        raise CheckpointError(
            f"{path} has checkpoint format version {blob.get('version')!r}; this "
            f"transformer_edu reads version {version}"
        )
    missing = needs - set(blob)
    if missing:
        raise CheckpointError(f"{path} lacks {sorted(missing)}")
    return blob


def build_model_from_state(config: Any, state: Any, path: str | Path) -> Transformer:
    """A Transformer of ``config`` (a dict) carrying ``state``; CheckpointError naming
    what does not fit (bad config, missing, unexpected or misshapen weights)."""
    try:
        model = Transformer(TransformerConfig.from_dict(config))
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: bad config: {e}") from e
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: no weights")
    ours = model.state_dict()
    problems = [f"missing {k}" for k in ours if k not in state]
    problems += [f"unexpected {k}" for k in state if k not in ours]
    problems += [
        f"{k} has shape {tuple(state[k].shape)}, the config needs {tuple(v.shape)}"
        for k, v in ours.items()
        if k in state and tuple(state[k].shape) != tuple(v.shape)
    ]
    if problems:
        shown = "; ".join(problems[:3]) + (
            f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
        )
        raise CheckpointError(f"{path}: weights do not fit the config: {shown}")
    model.load_state_dict(state)
    return model


def toy_model(
    path: str | Path | None = None,
    train_if_missing: bool = True,
    progress: bool = True,
    device: str | None = None,
) -> tuple[Transformer, Vocab, Vocab]:
    """The trained default toy model, loaded from ``path`` (default location), or
    trained and saved there first if it is missing, was trained on another corpus or
    is not the current default toy model (``TOY_MODEL``).

    The model is returned in eval mode on ``device`` (default: ``pick_device``: CUDA, else MPS, else the CPU).
    """
    from ..devices import pick_device

    device = pick_device(device)  # trained or loaded, the model ends up here
    path = Path(path) if path else default_checkpoint_path()
    if path.is_file():
        try:
            model, sv, tv, meta = load_checkpoint(path, device)
        except CheckpointError:
            if not train_if_missing:
                raise
        else:
            from .training import TOY_MODEL

            current = meta.get("corpus") == corpus_fingerprint() and (
                model.config == make_config(len(sv), len(tv), **TOY_MODEL)
            )  # else trained on another corpus, or an older default toy model
            if current or not train_if_missing:
                return model, sv, tv
    if not train_if_missing:
        raise CheckpointError(f"no checkpoint at {path}")
    model, sv, tv, _ = train_and_save_toy_model(path, progress=progress, device=device)
    return model, sv, tv


def train_and_save_toy_model(
    path: str | Path,
    progress: bool = True,
    device=None,
    seed: int | None = None,
    **overrides,
):
    """Train the default toy model and save it, with its exact matches, seed and
    training time in the checkpoint's meta. ``seed`` defaults to train_toy_model's
    (0, shifted by ``TEDU_SEED``). Returns (model, src_vocab, tgt_vocab, history)."""
    from .training import train_toy_model

    model, sv, tv, hist = train_toy_model(
        progress=progress, device=device, seed=seed, **overrides
    )
    save_checkpoint(path, model, sv, tv, meta={
        "train_exact": hist.train_exact[-1], "eval_exact": hist.eval_exact[-1],
        "seconds": hist.seconds, "device": hist.device, "seed": hist.seed,
    })  # fmt: skip
    return model, sv, tv, hist
