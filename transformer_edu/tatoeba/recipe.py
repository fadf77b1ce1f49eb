"""How the Tatoeba model trains: its sizes, the training settings and the recipe for
each device (what ``bench --tatoeba --recipes`` measures change by change).

``TATOEBA_MODEL``: the shipped model's sizes and where it drops out.
``TatoebaTrainConfig``: the budget, batch, schedule and how a step runs (fused Adam,
bf16 autocast). ``recipe_for(device)``: the CPU's defaults, or the GPU's
``CUDA_RECIPE``; ``configure_backends`` and ``autocast_context`` set up the device.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch

from ..devices import cpu_bf16_report as cpu_bf16_report  # chapter 12 imports it here
from ..devices import describe_machine_ja as describe_machine_ja  # chapter 12b too
from ..devices import native_bf16
from ..model.config import TransformerConfig

# The shipped model's sizes: chosen for 60 minutes on 2 CPU cores (see the chapter).
# One 8,000-piece vocabulary for both languages, shared by the source and target
# embeddings and the generator; 4 encoder and 2 decoder layers (the decoder costs more
# per layer and a shallow one loses little); pre-LN, which tolerates the high learning
# rate a short run needs.
# Dropout only where the paper puts it (§5.4: sub-layer outputs, embeddings + PE), not
# also on the attention weights and the FFN's hidden ReLU as nn.Transformer does:
# the same regulariser where it matters, and fewer random numbers per step.
# fast=False: attention written out (matmul, softmax, matmul), which under bf16
# autocast on the CPU trains faster on these short sentences than PyTorch's fused
# kernel, whose backward took a fifth of a step (bench --tatoeba --recipes).
TATOEBA_MODEL = dict(
    d_model=256, n_heads=4, d_ff=1024, n_encoder_layers=4, n_decoder_layers=2,
    dropout=0.1, attention_dropout=0.0, activation_dropout=0.0, max_len=128,
    norm_first=True, share_embeddings=True, tie_generator=True, fast=False,
)  # fmt: skip


AUTOCAST = ("auto", "bf16", None)  # TatoebaTrainConfig.autocast's settings


@dataclass
class TatoebaTrainConfig:
    minutes: float = 60.0  # wall-clock budget, evaluations included
    max_tokens: int = 6000  # padded source + target tokens per batch (per rank)
    lr_factor: float = 0.5  # multiplies the paper's schedule: the peak, at the end of
    # warm-up, is 0.5 * 256**-0.5 * 400**-0.5 = 1.5625e-3 here (d_model 256)
    warmup: int = 400  # steps
    cooldown: float = 0.2  # over the last fifth of the budget the learning rate falls
    # linearly to 0 (a time budget has a known end: anneal into it, Hägele et al. 2024)
    label_smoothing: float = 0.1
    clip_grad_norm: float | None = 1.0
    eval_minutes: float = 5.0  # dev BLEU every this many minutes
    eval_sentences: int = 500  # dev sentences scored at each interval
    keep_last: int = 5  # checkpoints averaged at the end
    max_steps: int | None = None  # stop earlier (tests)
    batches_per_step: int = 1  # >1: train on that many consecutive batches at once,
    # as that many torchrun ranks do together (tests compare one process with DDP)
    seed: int = 0
    device: str | None = None
    # how a step runs (the same update, faster; bench --tatoeba --recipes measures each)
    fused_adam: bool = True  # Adam's update in one fused kernel (CPU and CUDA)
    autocast: str | None = "auto"  # "bf16": forward under torch.autocast in bfloat16
    # (the matmuls in bf16; the attention's softmax, written out (fast=False), gets the
    # bf16 scores of a matmul and CPU autocast leaves it in bf16, where CUDA autocast
    # computes softmax in float32); the weights, Adam's state, the residual stream,
    # LayerNorm and the loss stay float32. None: all float32. "auto": bf16 where the
    # device multiplies it natively (a CPU with AVX-512 BF16 or AMX, an Ampere or later
    # GPU), else float32: a CPU without it emulates bf16, and a step took 24.7x
    # float32's time with the kernels capped at AVX2 (docs/RESULTS.md, "bf16 only
    # where the CPU has it")
    sync_every: int = 1  # read the step losses back (and, under DDP, rank 0's clock)
    # every this many steps: each read waits for a GPU to finish its queue; a CPU
    # computes in order anyway. Under DDP the learning rate's cool-down factor then
    # holds for that many steps
    compile: bool = False  # torch.compile the model (dynamic shapes): measured slower
    # here (bench --tatoeba --recipes), so off
    model: dict = field(default_factory=dict)  # overrides of TATOEBA_MODEL's sizes

    def __post_init__(self) -> None:
        if self.autocast not in AUTOCAST:
            raise ValueError(
                f"autocast={self.autocast!r}; expected 'auto', 'bf16' or None"
            )
        unknown = sorted(set(self.model) - set(TransformerConfig.__dataclass_fields__))
        if unknown:
            raise ValueError(
                f"model overrides {unknown} are not TransformerConfig fields"
            )

    def set(self, assignment: str) -> None:
        """Apply ``"name=value"`` (``"model.name=value"`` for a model size), the value
        read as Python literal (``"max_tokens=3000"``, ``"autocast=None"``)."""
        import ast

        name, sep, text = assignment.partition("=")
        if not sep:
            raise ValueError(f"--set {assignment!r}: expected name=value")
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = text  # a bare word: a string
        if name.startswith("model."):
            self.model = {**self.model, name.removeprefix("model."): value}
        elif name in self.__dataclass_fields__ and name != "model":
            setattr(self, name, value)
        else:
            raise ValueError(f"--set {name}: not a TatoebaTrainConfig field")
        self.__post_init__()


# On a GPU (``train --corpus tatoeba --device cuda``), from measurement: one NVIDIA
# H200 (torch 2.11, CUDA 13), 4.5-minute runs, dev BLEU after 4.5 minutes (the chapter
# gives the table). The paper's batch, about 25,000 source and 25,000 target tokens,
# is ~78 steps an epoch of this corpus, so the paper's 4,000 warm-up steps are ~51
# epochs: with them the CPU-sized model never left warm-up (17.9). The paper's base
# sizes (d_model 512, 8 heads, d_ff 2048, 6 + 6 layers) with 1,000 warm-up steps
# reached 29.9; the CPU's recipe on the GPU 23.7. The schedule is the paper's,
# unscaled; the losses are read back every 25 steps (each read waits for the GPU).
CUDA_MODEL = dict(d_model=512, n_heads=8, d_ff=2048, n_encoder_layers=6,
                  n_decoder_layers=6)  # fmt: skip
CUDA_RECIPE = dict(max_tokens=50_000, warmup=1000, lr_factor=1.0, sync_every=25,
                   model=CUDA_MODEL)  # fmt: skip


def recipe_for(device: str | torch.device, **overrides) -> TatoebaTrainConfig:
    """The training recipe for ``device``: TatoebaTrainConfig's defaults on the CPU
    (bf16 autocast where the CPU has native bf16, ``native_bf16``), CUDA_RECIPE on a
    GPU; ``overrides`` last."""
    device = torch.device(device)
    base = CUDA_RECIPE if device.type == "cuda" else {}
    return TatoebaTrainConfig(**{**base, "device": str(device), **overrides})


def configure_backends(device: torch.device) -> dict[str, bool]:
    """On CUDA, TF32 for float32 matmuls and convolutions (what autocast leaves in
    float32); returns the flags as set (nothing changes on the CPU)."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    return {
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32_cudnn": torch.backends.cudnn.allow_tf32,
    }


def resolve_autocast(autocast: str | None, device: torch.device) -> str | None:
    """``"auto"`` made concrete for ``device``: ``"bf16"`` where it multiplies bf16
    natively (``native_bf16``), else None (float32); other settings as they are."""
    if autocast != "auto":
        return autocast
    return "bf16" if native_bf16(device.type)[0] else None


def autocast_choice(autocast: str | None, device: torch.device) -> str:
    """One line: the autocast a run uses on ``device`` and why."""
    chosen = resolve_autocast(autocast, device)
    what = "bf16 autocast" if chosen else "float32 (no autocast)"
    if autocast != "auto":
        return f"{what}: set explicitly (autocast={autocast!r})"
    ok, said = native_bf16(device.type)
    why = (
        "multiplies bf16 natively" if ok else "has no native bf16 (it would emulate it)"
    )
    return f"{what}: this {device.type.upper()} {why} ({said})"


def autocast_context(device: torch.device, autocast: str | None):
    """``torch.autocast`` in bfloat16 on ``device`` (a no-op context for None, or
    for "auto" where the device has no native bf16)."""
    if resolve_autocast(autocast, device) is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
