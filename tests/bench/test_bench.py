"""The benchmarks compare like with like: nn.Transformer's counterpart computes what
ours computes, the bench's step is train_tatoeba's, and each mode runs end to end."""

import re

import pytest
import torch

from transformer_edu.bench.model import TorchTransformerModel
from transformer_edu.bench.tatoeba import tatoeba_train_step
from transformer_edu.cli import main
from transformer_edu.model.transformer import (
    Decoder,
    Encoder,
    count_parameters,
    make_model,
)
from transformer_edu.tatoeba.data import (
    default_tokenizer,
    encode_pairs,
    load_tatoeba,
    make_token_batch,
    token_batches,
)
from transformer_edu.tatoeba.recipe import (
    TATOEBA_MODEL,
    TatoebaTrainConfig,
    native_bf16,
)
from transformer_edu.tatoeba.train import build_tatoeba_model, train_tatoeba

TINY = dict(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=2, n_decoder_layers=1)


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _copy_into_ours_(ours, theirs) -> None:
    """nn.Transformer's weights into ours (embeddings, stacks, generator)."""
    with torch.no_grad():
        ours.src_embed.embedding.weight.copy_(theirs.src_embed.weight)
        ours.tgt_embed.embedding.weight.copy_(theirs.tgt_embed.weight)
        ours.encoder.load_state_dict(
            Encoder.from_torch(theirs.transformer.encoder).state_dict()
        )
        ours.decoder.load_state_dict(
            Decoder.from_torch(theirs.transformer.decoder).state_dict()
        )
        ours.generator.proj.weight.copy_(theirs.generator.weight)
        ours.generator.proj.bias.copy_(theirs.generator.bias)


@pytest.mark.parametrize(
    "flags",
    [
        dict(norm_first=True, share_embeddings=True, tie_generator=True),  # Tatoeba's
        dict(norm_first=False, final_norm=True),  # the toy bench's
    ],
)
def test_torch_counterpart_computes_what_ours_computes(flags):
    torch.manual_seed(0)
    ours = make_model(40, 40, **TINY, **flags).eval()
    theirs = TorchTransformerModel.from_config(ours.config).eval()
    assert count_parameters(ours) == count_parameters(theirs)
    with torch.no_grad():  # a pad row that tying or init made non-zero
        theirs.src_embed.weight[0].zero_()
        theirs.tgt_embed.weight[0].zero_()
    _copy_into_ours_(ours, theirs)
    src = torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, 0, 0]])
    tgt = torch.tensor([[1, 13, 14, 15], [1, 16, 0, 0]])
    expected, got = theirs(src, tgt), ours(src, tgt)
    real = tgt != 0
    assert (got - expected)[real].abs().max() <= 1e-5


def test_the_tatoeba_configuration_has_the_same_parameters_in_both():
    ours = make_model(8000, 8000, **TATOEBA_MODEL)
    theirs = TorchTransformerModel.from_config(ours.config)
    assert count_parameters(ours) == count_parameters(theirs) == 7_322_944
    assert theirs.generator.weight is theirs.tgt_embed.weight is theirs.src_embed.weight
    assert len(theirs.transformer.encoder.layers) == 4
    assert len(theirs.transformer.decoder.layers) == 2
    assert theirs.transformer.encoder.layers[0].norm_first
    no_final = make_model(50, 50, **TINY, final_norm=False).config
    with pytest.raises(ValueError, match="no counterpart for no final LayerNorm"):
        TorchTransformerModel.from_config(no_final)


def test_the_bench_step_is_train_tatoebas_step():
    """Two steps of train_tatoeba and of the bench's step from the same weights on the
    same batches give the same weights (dropout off, so both are deterministic)."""
    tok, pairs = default_tokenizer(), load_tatoeba("train")[:300]
    cfg = TatoebaTrainConfig(max_tokens=300, max_steps=2, seed=0, device="cpu")
    trained, _ = train_tatoeba(
        build_tatoeba_model(tok, 0, **TINY, dropout=0.0), cfg, tok, pairs, [],
        progress=False, log=lambda s: None,
    )  # fmt: skip
    ours = build_tatoeba_model(tok, 0, **TINY, dropout=0.0).train()
    step = tatoeba_train_step(ours, ours.config.d_model, cfg)
    data = encode_pairs(pairs, tok)
    first_epoch = token_batches(data, cfg.max_tokens, cfg.seed * 1_000_003 + 1)
    for index in first_epoch[:2]:
        step(make_token_batch(data, index))
    mismatched = [
        k
        for k, v in ours.state_dict().items()
        if not torch.allclose(v, trained.state_dict()[k], atol=1e-6)
    ]
    assert not mismatched
    untrained = build_tatoeba_model(tok, 0, **TINY, dropout=0.0)
    assert not torch.equal(untrained.encoder.layers[0].ffn.linear1.weight,
                           ours.encoder.layers[0].ffn.linear1.weight)  # fmt: skip


def test_bench_tatoeba_quick_reports_tokens_per_second_and_the_ratio(capsys):
    code, out, err = _run(capsys, "bench", "--tatoeba", "--quick")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert "parameters each" in lines[0] and "pre-LN" in lines[0]
    assert "real Tatoeba batches" in lines[1]
    assert lines[2].startswith("ours ") and " nn.Transformer " in lines[2]
    prefix = "time ratio ours/nn.Transformer: "
    assert lines[-2].startswith(prefix) and "below 1: ours faster" in lines[-2]
    assert float(lines[-2][len(prefix) :].split()[0]) > 0
    # train_tatoeba's own loop beside the bare step, so the loop's cost shows
    loop = re.fullmatch(
        r"train_tatoeba's loop, the same 3 steps: ([\d,]+) tokens/s against the "
        r"bare step's ([\d,]+) \(warm-up included\): x([\d.]+) of it",
        lines[-1],
    )
    assert loop, lines[-1]
    assert all(float(g.replace(",", "")) > 0 for g in loop.groups())


def test_bench_ddp_quick_launches_one_and_two_ranks(capsys):
    code, out, err = _run(capsys, "bench", "--ddp", "--quick")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert "torch.distributed.run --standalone" in lines[0]
    assert lines[1].startswith("1 rank x ") and "tokens/s" in lines[1]
    assert lines[2].startswith("2 ranks x ") and "tokens/s" in lines[2]
    prefix = "speed-up 2 ranks / 1 rank: "
    assert lines[-1].startswith(prefix)
    assert float(lines[-1][len(prefix) :].split("x")[0]) > 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--tatoeba", "--quick", "--steps", "1000"], "the bench needs warmup_steps"),
        (["--ddp", "--quick", "--steps", "1000"], "for 2 rank(s); the bench needs"),
        (["--ddp", "--quick", "--nproc", "1"], "nproc=1: compare 1 rank with"),
        (["--ddp", "--device", "cuda"], "--ddp runs on the CPU"),
        (["--tatoeba", "--steps", "0"], "steps=0 must be an integer >= 1"),
        (["--steps", "3"], "are for --tatoeba or --ddp"),
        (["--limit", "3"], "--limit is for --decoding"),
        (["--decoding", "--steps", "3"], "--decoding takes --limit and --threads"),
        (["--decoding", "--limit", "0"], "--limit 0 must be at least 1"),
    ],
)
def test_bench_bad_options_exit_2_with_one_line(capsys, argv, message):
    code, out, err = _run(capsys, "bench", *argv)
    assert code == 2 and message in err and err.count("\n") == 1, err


def test_bench_tatoeba_recipes_quick_compares_each_change_with_the_first(capsys):
    code, out, _ = _run(capsys, "bench", "--tatoeba", "--recipes", "--quick")
    lines = out.strip().splitlines()
    assert code == 0 and "real Tatoeba batches" in lines[0]
    # where it was measured, and what the shipped recipe's autocast="auto" takes here
    assert lines[1].startswith("machine: ") and " cores, " in lines[1]
    assert lines[2].startswith("the shipped recipe (autocast='auto') here: ")
    assert ("bf16 autocast: " in lines[2]) == native_bf16("cpu")[0]
    rows = [line.split("  ")[0].strip() for line in lines[3:]]
    assert rows == ["before", "+ paper's dropout", "+ fused Adam", "+ bf16 autocast",
                    "+ written-out attention"]  # fmt: skip
    assert "x1.00 of 'before'" in lines[3] and all("tokens/s" in x for x in lines[3:])


def test_bench_tatoeba_curves_quick_prints_each_recipes_loss(capsys):
    code, out, _ = _run(capsys, "bench", "--tatoeba", "--curves", "4", "--quick")
    assert code == 0 and "largest gap of '+ bf16 autocast'" in out


def test_bench_decoding_quick_compares_the_cache_and_greedy_side_by_side(capsys):
    """Beam 4 over 6 test sentences, with and without the cache, and greedy: the
    cached search gives the uncached one's translations, and the ratios print."""
    code, out, err = _run(capsys, "bench", "--decoding", "--quick")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert "test split, 6 sentences in 2 chunks; beam 4, alpha 0.6" in lines[0]
    assert "one sentence at a time, no cache" in lines[1]
    assert lines[2] == "same translations, cached vs uncached: 6 of 6"
    assert float(lines[3].removeprefix("beam 4 / greedy time: ")) > 0
    prefix = "cached beam search speed-up over uncached: "
    assert lines[-1].startswith(prefix) and float(lines[-1][len(prefix) :]) > 0
