import torch

from transformer_edu import make_decoder_only, make_model
from transformer_edu.modern.experiments import (
    Recipe,
    decoding_cost,
    heldout_loss,
    run,
    step_flops,
    toy_data,
)

TINY = dict(d_model=16, n_heads=2, d_ff=32, dropout=0.0, max_len=64)


def _models():
    _, _, sv, tv = toy_data()
    torch.manual_seed(0)
    enc_dec = make_model(len(sv), len(tv), n_layers=1, **TINY)
    torch.manual_seed(0)
    dec_only = make_decoder_only(len(sv), len(tv), 2, **{**TINY, "d_ff": 48})
    return enc_dec, dec_only


def test_every_model_sees_the_same_batches_and_is_measured_the_same_way():
    results = [run(m, Recipe(steps=6, warmup=3), seed=1) for m in _models()]
    a, b = results
    assert (a.steps, a.src_tokens, a.tgt_tokens) == (
        b.steps,
        b.src_tokens,
        b.tgt_tokens,
    )
    assert a.tgt_tokens > 6 * 32  # at least one real token per pair and step
    for r in results:
        assert 0 <= r.exact <= 1 and r.loss > 0


def test_the_loss_is_the_mean_over_target_tokens():
    enc_dec, _ = _models()
    _, test_pairs, sv, tv = toy_data()
    one, two = (
        heldout_loss(enc_dec, test_pairs[:1]),
        heldout_loss(enc_dec, test_pairs[1:2]),
    )
    n1, n2 = len(test_pairs[0].tgt) + 1, len(test_pairs[1].tgt) + 1  # EOS included
    both = heldout_loss(enc_dec, test_pairs[:2])
    assert abs(both - (one * n1 + two * n2) / (n1 + n2)) < 1e-5


def test_costs_count_the_products_and_the_cache():
    enc_dec, dec_only = _models()
    a, b = decoding_cost(enc_dec, n_sentences=3), decoding_cost(dec_only, n_sentences=3)
    assert a.flops > 0 and b.flops > a.flops  # two layers over source and target
    assert a.cache_floats > 0 and b.cache_floats > 0 and a.seconds > 0
    assert step_flops(dec_only, 4) > step_flops(enc_dec, 4) > 0
    assert all(p.grad is None for p in enc_dec.parameters())  # nothing left behind
    assert enc_dec.encoder.layers[0].self_attn.fast  # the fast path is back
