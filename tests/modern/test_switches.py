"""The switches of chapter 13: each puts its successor in place of the 2017 piece, and
with the defaults the model is the paper's (the original classes, the same weights'
names, old checkpoints loading)."""

import pytest
import torch

from transformer_edu import (
    GatedFeedForward,
    GroupedQueryAttention,
    LayerNorm,
    MixtureOfExperts,
    MultiHeadAttention,
    PositionwiseFeedForward,
    RMSNorm,
    TransformerConfig,
    count_parameters,
    make_model,
)
from transformer_edu.decoding import beam_search, greedy_decode
from transformer_edu.toy.checkpoint import load_checkpoint, save_checkpoint
from transformer_edu.toy.data import Vocab

SIZES = dict(n_layers=2, d_model=16, n_heads=4, d_ff=32, dropout=0.0)
SWITCHES = [
    dict(norm="rms"),
    dict(ffn="swiglu"),
    dict(ffn="geglu"),
    dict(positional="rope"),
    dict(positional="alibi"),
    dict(n_kv_heads=1),
    dict(n_kv_heads=2),
    dict(n_experts=3, expert_top_k=2),
    dict(norm="rms", ffn="swiglu", positional="rope", n_kv_heads=2, norm_first=True),
]


def _model(**kw):
    torch.manual_seed(0)
    model = make_model(11, 13, **{**SIZES, **kw}).eval()
    with torch.no_grad():  # an untrained model may write PAD, which decoding
        model.generator.proj.bias[Vocab.PAD] = -1e4  # without a cache would mask
    return model


def _vocabs():  # the sizes of _model's vocabularies: 11 and 13 ids
    specials = list(Vocab.SPECIALS)
    return (
        Vocab(specials + [f"s{i}" for i in range(7)]),
        Vocab(specials + [f"t{i}" for i in range(9)]),
    )


def _batch():
    src = torch.tensor([[4, 5, 6, 7, 8], [9, 4, 5, 0, 0]])
    return src, torch.tensor([[1, 4, 5, 6], [1, 7, 0, 0]])


def test_by_default_every_piece_is_the_papers():
    model = _model()
    kinds = {type(m) for m in model.modules()}
    assert {LayerNorm, PositionwiseFeedForward, MultiHeadAttention} <= kinds
    assert not kinds & {RMSNorm, GatedFeedForward, GroupedQueryAttention}
    assert MixtureOfExperts not in kinds
    # the same weights' names and shapes as before the switches existed
    explicit = _model(norm="layer", ffn="relu", n_kv_heads=None, n_experts=0)
    assert {k: v.shape for k, v in model.state_dict().items()} == {
        k: v.shape for k, v in explicit.state_dict().items()
    }
    src, tgt = _batch()
    assert torch.equal(model(src, tgt), explicit(src, tgt))


def test_a_checkpoint_config_without_the_new_fields_loads(tmp_path):
    model = _model()
    path = save_checkpoint(tmp_path / "m.pt", model, *_vocabs())
    blob = torch.load(path, weights_only=True)
    for name in ("norm", "ffn", "n_kv_heads", "n_experts", "expert_top_k"):
        del blob["config"][name]  # a checkpoint written before chapter 13's switches
    torch.save(blob, path)
    loaded, *_ = load_checkpoint(path)
    src, tgt = _batch()
    assert torch.equal(loaded(src, tgt), model(src, tgt))


@pytest.mark.parametrize(
    "switch", SWITCHES, ids=lambda s: ",".join(map(str, s.values()))
)
def test_each_switch_swaps_its_piece_and_decodes_with_and_without_cache(
    tmp_path, switch
):
    model = _model(**switch)
    layers = [*model.encoder.layers, *model.decoder.layers]
    if switch.get("norm") == "rms":
        assert all(isinstance(layer.norm1, RMSNorm) for layer in layers)
    if switch.get("ffn") in ("swiglu", "geglu"):
        assert all(isinstance(layer.ffn, GatedFeedForward) for layer in layers)
    if "n_kv_heads" in switch or switch.get("positional") in ("rope", "alibi"):
        assert all(
            isinstance(layer.self_attn, GroupedQueryAttention) for layer in layers
        )
    if "n_kv_heads" in switch:  # cross-attention shares its keys and values too
        assert all(
            layer.cross_attn.n_kv_heads == switch["n_kv_heads"]
            for layer in model.decoder.layers
        )
    if switch.get("n_experts"):
        assert all(isinstance(layer.ffn, MixtureOfExperts) for layer in layers)
    src, _ = _batch()
    cached = greedy_decode(model, src, max_len=6, use_cache=True)
    fresh = greedy_decode(model, src, max_len=6, use_cache=False)
    assert cached.tokens == fresh.tokens
    torch.testing.assert_close(
        torch.tensor(cached.log_probs), torch.tensor(fresh.log_probs)
    )
    assert beam_search(model, src[:1], 2, max_len=5)  # the beam runs on it too
    # a checkpoint of a switched model loads into the same model
    path = save_checkpoint(tmp_path / "m.pt", model, *_vocabs())
    loaded, *_ = load_checkpoint(path)
    src, tgt = _batch()
    assert torch.equal(loaded(src, tgt), model(src, tgt))


def test_what_each_switch_saves_or_adds_in_parameters():
    D, L, n_norms = 16, 2, 2 * 2 + 2 * 3  # encoder layers 2 norms, decoder layers 3
    base = count_parameters(_model())
    assert base - count_parameters(_model(norm="rms")) == n_norms * D  # no β
    # multi-query: each of the 2 + 2·2 attentions keeps 1 of 4 key and value heads
    n_attention = L + 2 * L
    saved = n_attention * 2 * (D * D + D) * 3 // 4
    assert base - count_parameters(_model(n_kv_heads=1)) == saved
    assert count_parameters(_model(positional="rope")) == base  # nothing learned
    experts = count_parameters(_model(n_experts=3)) - base
    ffn = 2 * D * 32 + 32 + D
    assert experts == 2 * L * (2 * ffn + 3 * D)  # two more networks and a router


def test_bad_switches_are_named():
    for bad, match in [
        (dict(norm="batch"), "norm='batch'"),
        (dict(ffn="glu"), "ffn='glu'"),
        (dict(n_kv_heads=3), "n_kv_heads=3"),
        (dict(n_experts=2, expert_top_k=3), "expert_top_k=3"),
        (dict(positional="rope", d_model=12, n_heads=4), "odd"),
    ]:
        with pytest.raises(ValueError, match=match):
            TransformerConfig(10, 10, **{**dict(d_model=16, n_heads=4), **bad})
