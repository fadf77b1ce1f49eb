"""Training on Tatoeba: checkpoint averaging, fp16 checkpoints, the meta device, and
a short run that must improve dev BLEU."""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import platform
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from transformer_edu.model.transformer import make_model
from transformer_edu.tatoeba.checkpoint import (
    load_tatoeba_checkpoint,
    save_tatoeba_checkpoint,
)
from transformer_edu.tatoeba.data import (
    default_tokenizer,
    encode_pairs,
    load_tatoeba,
    make_token_batch,
    token_batches,
)
from transformer_edu.tatoeba.recipe import TATOEBA_MODEL, TatoebaTrainConfig
from transformer_edu.tatoeba.train import (
    average_state_dicts,
    build_tatoeba_model,
    dev_loss,
    train_tatoeba,
)
from transformer_edu.tatoeba.translate import evaluate
from transformer_edu.toy.checkpoint import CheckpointError
from transformer_edu.toy.data import Vocab, build_vocabs, load_corpus
from transformer_edu.toy.training import TOY_MODEL

TINY = dict(d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1, n_decoder_layers=1)


# --- checkpoint averaging ----------------------------------------------------------


def test_average_state_dicts_against_a_hand_computed_mean():
    states = [
        {"w": torch.tensor([1.0, 2.0]), "h": torch.tensor([0.5], dtype=torch.float16),
         "steps": torch.tensor([7])},
        {"w": torch.tensor([3.0, 6.0]), "h": torch.tensor([1.5], dtype=torch.float16),
         "steps": torch.tensor([9])},
        {"w": torch.tensor([2.0, 1.0]), "h": torch.tensor([2.5], dtype=torch.float16),
         "steps": torch.tensor([11])},
    ]  # fmt: skip
    avg = average_state_dicts(states)
    torch.testing.assert_close(avg["w"], torch.tensor([2.0, 3.0]))  # (1+3+2)/3 ...
    assert avg["h"].dtype == torch.float16 and float(avg["h"]) == 1.5
    # an integer buffer (a counter, token ids) is not averaged: the first one is kept
    assert avg["steps"].dtype == torch.int64 and avg["steps"].tolist() == [7]
    assert states[0]["w"].tolist() == [1.0, 2.0]  # the inputs are left alone


def test_average_state_dicts_rejects_mismatched_or_no_checkpoints():
    a = {"w": torch.zeros(2), "b": torch.zeros(1)}
    with pytest.raises(ValueError, match="different parameters"):
        average_state_dicts([a, {"w": torch.zeros(2)}])
    with pytest.raises(ValueError, match="no checkpoints"):
        average_state_dicts([])


# --- fp16 checkpoints --------------------------------------------------------------


@pytest.fixture(scope="module")
def tok():
    return default_tokenizer()


@pytest.fixture(scope="module")
def tiny_model(tok):
    return build_tatoeba_model(tok, seed=0, **TINY).eval()


def test_checkpoint_round_trip_in_fp16_with_tied_weights_stored_once(
    tmp_path, tok, tiny_model
):
    path = save_tatoeba_checkpoint(tmp_path / "m.pt", tiny_model, tok, {"seed": 0})
    # model.parameters() lists a tied weight once; buffers in the state dict count too
    state_names = set(tiny_model.state_dict())
    unique = sum(p.numel() for p in tiny_model.parameters()) + sum(
        b.numel() for n, b in tiny_model.named_buffers() if n in state_names
    )
    shared = tiny_model.src_embed.weight.numel()  # also tgt_embed and the generator
    size = path.stat().st_size
    assert 2 * unique < size < 2 * unique + shared  # a second copy would not fit
    model, tok2, meta = load_tatoeba_checkpoint(path)
    assert meta == {"seed": 0} and tok2.model_proto == tok.model_proto
    assert not model.training
    assert (
        model.generator.proj.weight is model.tgt_embed.weight is model.src_embed.weight
    )
    for k, v in tiny_model.state_dict().items():
        got = model.state_dict()[k]
        assert got.dtype == v.dtype, k  # fp16 on disk, float32 again in memory
        torch.testing.assert_close(
            got, v.half().float() if v.is_floating_point() else v
        )
    src = torch.tensor([tok.encode("私は猫が好きです。")])
    tgt = torch.tensor([[Vocab.BOS, *tok.encode("I like cats.")]])
    torch.testing.assert_close(model(src, tgt), tiny_model(src, tgt), atol=2e-2, rtol=0)


def test_bad_checkpoints_raise_checkpoint_error(tmp_path, tok, tiny_model):
    good = save_tatoeba_checkpoint(tmp_path / "good.pt", tiny_model, tok)
    with pytest.raises(CheckpointError, match="no checkpoint at"):
        load_tatoeba_checkpoint(tmp_path / "missing.pt")
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_tatoeba_checkpoint(corrupt)
    blob = torch.load(good, weights_only=True)

    def variant(name, **change):
        path = tmp_path / name
        torch.save({**blob, **change}, path)
        return path

    with pytest.raises(CheckpointError, match="not a transformer_edu Tatoeba"):
        load_tatoeba_checkpoint(
            variant("toy.pt", format="transformer_edu.toy.checkpoint")
        )
    with pytest.raises(CheckpointError, match="version 99"):
        load_tatoeba_checkpoint(variant("v99.pt", version=99))
    other = hashlib.sha256(b"another SentencePiece model").hexdigest()
    with pytest.raises(CheckpointError, match="another SentencePiece model"):
        load_tatoeba_checkpoint(variant("spm.pt", spm_sha256=other))
    state = dict(blob["state_dict"])
    del state["generator.proj.bias"]
    with pytest.raises(CheckpointError, match="missing generator.proj.bias"):
        load_tatoeba_checkpoint(variant("short.pt", state_dict=state))


# --- the meta device ---------------------------------------------------------------


def _meta_forward_backward(model, src, tgt_in, tgt_out):
    """Forward and backward on the meta device: any tensor the model makes on the CPU
    (a mask, positions) meets meta tensors and raises."""
    model = model.to("meta").train()
    src, tgt_in, tgt_out = src.to("meta"), tgt_in.to("meta"), tgt_out.to("meta")
    logits = model(src, tgt_in)
    loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(),
                           ignore_index=Vocab.PAD, label_smoothing=0.1)  # fmt: skip
    loss.backward()
    assert logits.is_meta and logits.shape == (
        *tgt_out.shape,
        model.config.tgt_vocab_size,
    )
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and g.is_meta for g in grads)


def test_toy_model_forward_and_backward_on_the_meta_device():
    sv, tv = build_vocabs(load_corpus("train"))
    from transformer_edu.toy.data import make_batch

    b = make_batch(load_corpus("train")[:8], sv, tv)
    torch.manual_seed(0)
    model = make_model(len(sv), len(tv), **TOY_MODEL)
    _meta_forward_backward(model, b.src, b.tgt_in, b.tgt_out)


def test_tatoeba_model_forward_and_backward_on_the_meta_device(tok):
    data = encode_pairs(load_tatoeba("dev")[:64], tok)
    b = make_token_batch(data, token_batches(data, 2000, shuffle=False)[0])
    model = build_tatoeba_model(tok)  # the shipped size
    assert model.config.d_model == TATOEBA_MODEL["d_model"]
    _meta_forward_backward(model, b.src, b.tgt_in, b.tgt_out)


# --- training ----------------------------------------------------------------------

# Measured on 2 busy cores (seed 0): dev BLEU 0.00 before, 1.51 after 300 steps
# (29 s of CPU), dev loss 4.24. So short a run learns the target side: the model says
# one fluent-ish sentence for every input; BLEU needs outputs of 4+ tokens, which an
# untrained model does not end. The loss is the steadier sign, and is checked too.
SHORT = 10  # Japanese characters: short pairs are learned first
STEPS = 300
MIN_GAIN = 0.5  # BLEU points


def test_a_short_training_run_improves_dev_bleu(tok):
    train = [p for p in load_tatoeba("train") if len(p.ja) <= SHORT][:6000]
    dev = [p for p in load_tatoeba("dev") if len(p.ja) <= SHORT][:100]
    model = build_tatoeba_model(tok, seed=0, d_model=64, n_heads=2, d_ff=128,
                                n_encoder_layers=1, n_decoder_layers=1)  # fmt: skip
    before = evaluate(model, tok, dev)[0].score
    before_loss = dev_loss(model, encode_pairs(dev, tok))
    cfg = TatoebaTrainConfig(minutes=60, max_tokens=1000, lr_factor=1.0, warmup=50,
                             eval_minutes=100, max_steps=STEPS, device="cpu")  # fmt: skip
    logs: list[str] = []
    model, hist = train_tatoeba(model, cfg, tok, train, dev, progress=False,
                                log=logs.append)  # fmt: skip
    after = evaluate(model, tok, dev)[0].score
    assert hist.steps == STEPS and len(hist.step_loss) == STEPS
    assert hist.eval_steps == [STEPS] and len(logs) == 1  # one evaluation, at the end
    assert hist.final_bleu == pytest.approx(after)
    assert after > before + MIN_GAIN, (before, after)
    assert hist.eval_loss[-1] < before_loss - 2, (before_loss, hist.eval_loss)
    assert sum(hist.step_loss[-20:]) < 0.7 * sum(hist.step_loss[:20])


def test_training_without_dev_pairs_and_without_train_pairs(tok):
    train = [p for p in load_tatoeba("train") if len(p.ja) <= 6][:200]
    cfg = TatoebaTrainConfig(max_tokens=400, max_steps=3, eval_minutes=0.0,
                             keep_last=3, device="cpu")  # fmt: skip
    model = build_tatoeba_model(tok, seed=0, **TINY)
    # eval_minutes=0: an evaluation after every step, then the end; no dev pairs to
    # score or to choose the average by
    model, hist = train_tatoeba(model, cfg, tok, train, [], progress=False,
                                log=lambda s: None)  # fmt: skip
    assert hist.steps == 3 and math.isnan(hist.final_bleu) and not hist.averaged
    assert all(math.isnan(b) for b in hist.eval_bleu)
    with pytest.raises(ValueError, match="no training pairs"):
        train_tatoeba(model, cfg, tok, [], [], progress=False)
    cfg.max_tokens = 100_000  # one batch: fewer than batches_per_step
    cfg.batches_per_step = 2
    with pytest.raises(ValueError, match="fewer batches of max_tokens=100000"):
        train_tatoeba(model, cfg, tok, train, [], progress=False)


def test_the_learning_rate_anneals_to_zero_over_the_last_part_of_the_budget(tok):
    train = [p for p in load_tatoeba("train") if len(p.ja) <= 6][:200]
    cfg = TatoebaTrainConfig(max_tokens=400, max_steps=10, warmup=1, lr_factor=1.0,
                             cooldown=0.5, eval_minutes=100, device="cpu")  # fmt: skip
    model = build_tatoeba_model(tok, seed=0, **TINY)
    _, hist = train_tatoeba(model, cfg, tok, train, [], progress=False,
                            log=lambda s: None)  # fmt: skip
    d = TINY["d_model"]
    paper = [d**-0.5 * min(s**-0.5, s) for s in range(1, 11)]  # noam, warm-up 1
    # the step after step k (of 10) uses the factor of progress k/10: 1 up to 0.5,
    # then (1 - k/10) / 0.5
    scale = [1.0] + [min(1.0, (1 - k / 10) / 0.5) for k in range(1, 10)]
    assert hist.step_lr == pytest.approx(
        [p * s for p, s in zip(paper, scale, strict=True)]
    )
    cfg.cooldown = 0.0  # off: the paper's schedule alone
    _, hist = train_tatoeba(build_tatoeba_model(tok, seed=0, **TINY), cfg, tok, train,
                            [], progress=False, log=lambda s: None)  # fmt: skip
    assert hist.step_lr == pytest.approx(paper)


# --- the recipe: where dropout acts, Adam's kernel, bf16 autocast, the GPU's settings ---


def test_the_shipped_recipe_drops_out_only_where_the_paper_does():
    from transformer_edu.model.attention import MultiHeadAttention
    from transformer_edu.model.feed_forward import PositionwiseFeedForward

    model = build_tatoeba_model(default_tokenizer())
    attention = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    ffns = [m for m in model.modules() if isinstance(m, PositionwiseFeedForward)]
    assert attention and all(m.dropout == 0.0 for m in attention)  # weights: none
    assert ffns and all(m.dropout.p == 0.0 for m in ffns)  # the hidden ReLU: none
    # sub-layer outputs and embeddings + PE: the paper's P_drop
    others = [m.p for name, m in model.named_modules()
              if isinstance(m, torch.nn.Dropout) and ".ffn." not in f".{name}."]  # fmt: skip
    assert others and set(others) == {TATOEBA_MODEL["dropout"]} == {0.1}
    assert (
        not model.config.fast
    )  # the written-out attention (bench --tatoeba --recipes)


def test_the_recipe_uses_the_fused_adam_kernel_and_bf16_where_the_cpu_has_it():
    from transformer_edu.tatoeba.recipe import native_bf16, resolve_autocast
    from transformer_edu.tatoeba.train import make_optimizer

    cfg = TatoebaTrainConfig()
    assert cfg.fused_adam and cfg.autocast == "auto" and not cfg.compile
    cpu = torch.device("cpu")
    native = native_bf16("cpu")[0]
    assert resolve_autocast("auto", cpu) == ("bf16" if native else None)
    assert (
        resolve_autocast("bf16", cpu) == "bf16" and resolve_autocast(None, cpu) is None
    )
    model = build_tatoeba_model(default_tokenizer(), **TINY)
    opt, _ = make_optimizer(model, TINY["d_model"], cfg)
    assert opt.defaults["fused"] is True  # this torch has a fused CPU kernel
    assert make_optimizer(model, 32, TatoebaTrainConfig(fused_adam=False))[0].defaults[
        "fused"
    ] in (None, False)
    with pytest.raises(ValueError, match="autocast='fp16'"):
        TatoebaTrainConfig(autocast="fp16")


def test_a_cpu_without_native_bf16_trains_in_float32(tok, monkeypatch):
    """Where the CPU would emulate bf16 (an AVX2 CPU: a step ~8x slower), the
    shipped recipe's "auto" runs the forward pass in float32, and says why."""
    import transformer_edu.tatoeba.recipe as recipe

    no_bf16 = (False, "torch's CPU capability AVX2, oneDNN bf16 no")
    monkeypatch.setattr(recipe, "native_bf16", lambda device_type="cpu": no_bf16)
    cpu = torch.device("cpu")
    assert recipe.resolve_autocast("auto", cpu) is None
    assert recipe.autocast_choice("auto", cpu).startswith("float32 (no autocast): ")
    assert "AVX2" in recipe.autocast_choice("auto", cpu)
    assert isinstance(recipe.autocast_context(cpu, "auto"), contextlib.nullcontext)
    train = [p for p in load_tatoeba("train") if len(p.ja) <= 6][:200]
    cfg = TatoebaTrainConfig(max_tokens=400, max_steps=2, eval_minutes=100,
                             device="cpu")  # fmt: skip
    logs: list[str] = []
    _, hist = train_tatoeba(build_tatoeba_model(tok, seed=0, **TINY), cfg, tok, train,
                            [], log=logs.append)  # fmt: skip
    assert hist.autocast is None and logs[0].startswith("forward pass: float32")
    monkeypatch.setattr(recipe, "native_bf16", lambda device_type="cpu": (True, ""))
    assert recipe.resolve_autocast("auto", cpu) == "bf16"


def test_where_a_figure_was_measured_reads_in_japanese_too(monkeypatch):
    """describe_machine names the CPU, its cores and threads, and its vector units;
    the Japanese edition gets the same facts in Japanese (chapter 12b glues both)."""
    import transformer_edu.devices as recipe  # where the machine is described

    monkeypatch.setattr(recipe, "cpu_name", lambda: "AMD EPYC")
    for native, words in ((True, "bf16 をネイティブに演算"),
                          (False, "bf16 はエミュレーション")):  # fmt: skip
        monkeypatch.setattr(recipe, "native_bf16", lambda d="cpu", n=native: (n, ""))
        described = recipe.describe_machine(threads=1)
        assert described.startswith("AMD EPYC (") and " 1 torch thread; " in described
        assert ("no native bf16" in described) is not native
        ja = recipe.describe_machine_ja(described)
        assert ja.startswith("AMD EPYC（") and ja.endswith(f"、{words}）"), ja
        assert "コア、torch スレッド 1、" in ja and "cores" not in ja
    # an older record's text, without the CPU's name: its words translated
    assert recipe.describe_machine_ja("x86_64, 2 cores, 2 torch threads") == (
        "x86_64、2 コア、2 torch スレッド"
    )


@pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"), reason="ONEDNN_MAX_CPU_ISA is x86's"
)
def test_capping_onednn_at_avx2_turns_bf16_off():
    """What an AVX2-only CPU reports, on any x86-64 CPU: oneDNN capped at AVX2."""
    code = ("import torch; from transformer_edu.tatoeba.recipe import *; "
            "print(resolve_autocast('auto', torch.device('cpu')))")  # fmt: skip
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120, check=True)  # fmt: skip
    assert out.stdout.strip() == "None"


def test_a_bf16_autocast_step_gives_float32s_loss_within_a_tolerance():
    """The same model, the same real batch, one training step each way: the loss
    under bf16 autocast is float32's to within 1 %, and so is the next step's."""
    import copy

    from transformer_edu.tatoeba.train import make_optimizer, train_step

    tok = default_tokenizer()
    data = encode_pairs(load_tatoeba("dev")[:200], tok)
    batches = [make_token_batch(data, idx) for idx in token_batches(data, 2000, seed=0)]
    base = build_tatoeba_model(tok, seed=0, dropout=0.0, **TINY)
    losses = {}
    for autocast in (None, "bf16"):
        model = copy.deepcopy(base).train()
        cfg = TatoebaTrainConfig(autocast=autocast, warmup=10)
        opt, sched = make_optimizer(model, TINY["d_model"], cfg)
        losses[autocast] = [float(train_step(model, opt, sched, b, cfg)[0])
                            for b in batches[:2]]  # fmt: skip
    for a, b in zip(losses[None], losses["bf16"], strict=True):
        assert abs(a - b) / a < 0.01, losses
    # what stays float32: the weights and the loss
    logits_dtype = {}
    model = copy.deepcopy(base).eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        logits_dtype["forward"] = model(batches[0].src, batches[0].tgt_in).dtype
    assert logits_dtype["forward"] == torch.bfloat16
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_the_gpu_recipe_without_a_gpu():
    """What --device cuda changes that a CPU can check: the batch size and schedule,
    the dtype autocast uses on the device, TF32, and a batch moved to the device."""
    from transformer_edu.tatoeba.recipe import (
        CUDA_RECIPE,
        autocast_context,
        configure_backends,
        recipe_for,
    )

    gpu, cpu = recipe_for("cuda", seed=3), recipe_for("cpu")
    # measured on an H200: the paper's base sizes, its batch, 1,000 warm-up steps
    assert (gpu.max_tokens, gpu.warmup, gpu.lr_factor) == (50_000, 1000, 1.0)
    assert gpu.model == dict(d_model=512, n_heads=8, d_ff=2048, n_encoder_layers=6,
                             n_decoder_layers=6)  # fmt: skip
    assert {k: getattr(gpu, k) for k in CUDA_RECIPE} == CUDA_RECIPE
    assert gpu.device == "cuda" and gpu.seed == 3 and gpu.autocast == "auto"
    assert gpu.sync_every > 1 and cpu.sync_every == 1
    assert cpu == TatoebaTrainConfig(device="cpu")  # the CPU keeps the defaults
    with pytest.warns(UserWarning) if not torch.cuda.is_available() else _nothing():
        ctx = autocast_context(torch.device("cuda"), "bf16")
    assert ctx.device == "cuda" and ctx.fast_dtype == torch.bfloat16
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        assert configure_backends(torch.device("cpu"))["tf32_matmul"] is False
        assert configure_backends(torch.device("cuda")) == {
            "tf32_matmul": True, "tf32_cudnn": True}  # fmt: skip
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
    data = encode_pairs(load_tatoeba("dev")[:20], default_tokenizer())
    batch = make_token_batch(data, list(range(20))).to("meta")
    assert {t.device.type for t in batch if isinstance(t, torch.Tensor)} == {"meta"}


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# --- a checkpoint saved from a GPU ---------------------------------------------------


class _GpuLikeCpu:
    """``Tensor.cpu`` as it behaves on a CUDA tensor: it returns a fresh copy, and the
    memory of a copy that was freed is handed to the next copy of the same size (the
    caching allocator does this), so two different weights can share an address."""

    def __init__(self):
        import weakref

        self.free: dict[tuple, list] = {}  # (numel, dtype) -> reusable storages
        self.live: list[tuple[weakref.ref, tuple, object]] = []
        self.copies = 0

    def __call__(self, tensor, *args, **kwargs):
        import weakref

        still = []
        for ref, key, storage in self.live:  # copies freed since: memory to reuse
            if ref() is None:
                self.free.setdefault(key, []).append(storage)
            else:
                still.append((ref, key, storage))
        self.live = still
        key = (tensor.numel(), tensor.dtype)
        pool = self.free.get(key)
        if pool:
            storage = pool.pop()
        else:
            storage = torch.empty(tensor.numel(), dtype=tensor.dtype).untyped_storage()
        copy = torch.empty(0, dtype=tensor.dtype).set_(storage, 0, tensor.shape)
        with torch.no_grad():
            copy.copy_(tensor)
        self.live.append((weakref.ref(copy), key, storage))
        self.copies += 1
        return copy


def test_the_gpu_like_cpu_copy_reuses_freed_memory():
    fake = _GpuLikeCpu()
    a, b = torch.ones(3), torch.zeros(3)
    first = fake(a)
    address = first.data_ptr()
    second = fake(b)
    assert second.data_ptr() != address  # the first copy is alive: new memory
    assert first.tolist() == [1.0, 1.0, 1.0] and second.tolist() == [0.0, 0.0, 0.0]
    del first
    again = fake(b)  # the first copy was freed: its memory again
    assert again.data_ptr() == address and again.tolist() == [0.0, 0.0, 0.0]


def test_a_checkpoint_trained_and_saved_where_cpu_copies_survives_the_round_trip(
    tmp_path, monkeypatch, capsys
):
    """``train --corpus tatoeba`` then ``evaluate``, as a user runs them, with
    ``Tensor.cpu`` returning copies as on a GPU: every tensor of the file equals the
    trained model's (in float16), and the file scores what the model scored."""
    import transformer_edu.cli as cli

    fake = _GpuLikeCpu()
    monkeypatch.setattr(torch.Tensor, "cpu", lambda self, *a, **k: fake(self))
    trained = {}
    import transformer_edu.tatoeba.checkpoint as ck  # the command imports from it

    real_save = ck.save_tatoeba_checkpoint

    def spy(path, model, tok, meta=None):
        trained["state"] = {
            k: v.detach().clone() for k, v in model.state_dict().items()
        }
        trained["model"] = model
        return real_save(path, model, tok, meta)

    monkeypatch.setattr(ck, "save_tatoeba_checkpoint", spy)
    path = tmp_path / "gpu.pt"
    sizes = [f"model.{k}={v}" for k, v in TINY.items()]
    argv = ["train", "--corpus", "tatoeba", "--max-steps", "4", "--quiet",
            "--device", "cpu", "--checkpoint", str(path), "--set", "max_tokens=800",
            "--set", "eval_sentences=40"] + [a for s in sizes for a in ("--set", s)]  # fmt: skip
    assert cli.main(argv) == 0
    assert fake.copies > 0  # the save went through the GPU-like copies
    monkeypatch.undo()
    blob = torch.load(path, weights_only=True)
    state = trained["state"]
    assert blob["state_dict"].keys() == state.keys()
    for k, v in state.items():
        got = blob["state_dict"][k]
        want = v.half() if v.is_floating_point() else v
        assert torch.equal(got, want), k
    # and the file translates as the trained model did (evaluate through the CLI)
    capsys.readouterr()
    assert cli.main(["evaluate", "--corpus", "tatoeba", "--checkpoint", str(path),
                     "--split", "dev", "--limit", "20", "--device", "cpu"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    model, tok, _ = load_tatoeba_checkpoint(path)
    dev = load_tatoeba("dev")[:20]
    from transformer_edu.tatoeba.translate import DEFAULT_ALPHA, DEFAULT_BEAM

    reloaded = evaluate(model, tok, dev, DEFAULT_BEAM, DEFAULT_ALPHA)[0]  # as the CLI
    lines = printed.splitlines()
    assert any(
        line.startswith(f"BLEU = {reloaded.score:.1f}, 95 % interval") for line in lines
    ), lines
    half = trained["model"].half().float()
    assert evaluate(half, tok, dev)[2] == evaluate(model, tok, dev)[2]


def test_reading_the_losses_back_every_n_steps_records_the_same_run(tok, monkeypatch):
    """The loop reads the losses back every ``sync_every`` steps (on a GPU each read
    waits for the device): the same losses, rates and tokens as every step, and the
    step losses travel back in that many reads."""
    import transformer_edu.tatoeba.train as tt

    train = [p for p in load_tatoeba("train") if len(p.ja) <= 6][:300]
    runs = {}
    for every in (1, 4):
        reads: list[int] = []

        def counting_read(values, reads=reads, real_read=tt._to_host):
            reads.append(len(values))
            return real_read(values)

        monkeypatch.setattr(tt, "_to_host", counting_read)
        cfg = TatoebaTrainConfig(max_tokens=400, max_steps=10, warmup=2, cooldown=0.5,
                                 eval_minutes=100, sync_every=every, device="cpu")  # fmt: skip
        _, hist = train_tatoeba(build_tatoeba_model(tok, seed=0, **TINY), cfg, tok,
                                train, [], progress=False, log=lambda s: None)  # fmt: skip
        monkeypatch.undo()
        runs[every] = hist
        assert hist.steps == 10 and len(hist.step_loss) == 10
        # every N steps, then the rest at the end
        assert reads == [every] * (10 // every) + ([10 % every] if 10 % every else [])
    a, b = runs[1], runs[4]
    assert a.step_loss == b.step_loss and a.step_lr == b.step_lr
    assert a.tokens == b.tokens > 0 and a.train_seconds > 0
    with pytest.raises(ValueError, match="sync_every=0"):
        train_tatoeba(build_tatoeba_model(tok, seed=0, **TINY),
                      TatoebaTrainConfig(sync_every=0, max_steps=1), tok, train, [],
                      progress=False)  # fmt: skip
