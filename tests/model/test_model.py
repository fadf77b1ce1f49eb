import pytest
import torch
import torch.nn.functional as F

from transformer_edu import Decoder, Encoder, count_parameters, make_model
from transformer_edu.model.masks import (
    combine_masks,
    from_torch_mask,
    key_padding_from_torch,
)


def _torch_stack(kind, layers, d, h, ff, norm_first, final_norm):
    if kind == "encoder":
        layer = torch.nn.TransformerEncoderLayer(
            d, h, ff, dropout=0.1, batch_first=True, norm_first=norm_first
        )
        norm = torch.nn.LayerNorm(d) if final_norm else None
        return torch.nn.TransformerEncoder(
            layer, layers, norm, enable_nested_tensor=False
        )
    layer = torch.nn.TransformerDecoderLayer(
        d, h, ff, dropout=0.1, batch_first=True, norm_first=norm_first
    )
    norm = torch.nn.LayerNorm(d) if final_norm else None
    return torch.nn.TransformerDecoder(layer, layers, norm)


def _randomise_norms(module):
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.normal_(1.0, 0.2)
                m.bias.normal_(0.0, 0.2)


CASES = [
    (nf, fn, seed) for nf in (False, True) for fn in (False, True) for seed in (0, 1)
]


@pytest.mark.parametrize("norm_first, final_norm, seed", CASES)
def test_encoder_from_torch_equals_nn_transformer_encoder(norm_first, final_norm, seed):
    g = torch.Generator().manual_seed(seed)
    B, S, H = 3, int(torch.randint(2, 9, (1,), generator=g)), 4
    D = H * 6
    torch.manual_seed(seed)
    theirs = _torch_stack("encoder", 3, D, H, 40, norm_first, final_norm).eval()
    _randomise_norms(theirs)
    ours = Encoder.from_torch(theirs).eval()
    x = torch.randn(B, S, D)
    lengths = torch.randint(1, S + 1, (B,), generator=g)
    lengths[0] = S
    kpm = torch.arange(S)[None, :] >= lengths[:, None]  # True = pad (torch's polarity)
    with torch.no_grad():  # torch takes its fused inference fast path here
        expected = theirs(x, src_key_padding_mask=kpm)
        got = ours(x, key_padding_from_torch(kpm))
    real = ~kpm
    assert (got - expected)[real].abs().max() <= 1e-5
    expected_slow = theirs(x, src_key_padding_mask=kpm)  # with autograd: the slow path
    assert (ours(x, key_padding_from_torch(kpm)) - expected_slow).abs().max() <= 1e-5


@pytest.mark.parametrize("norm_first, final_norm, seed", CASES)
def test_decoder_from_torch_equals_nn_transformer_decoder(norm_first, final_norm, seed):
    g = torch.Generator().manual_seed(seed)
    B, T, S, H = 3, int(torch.randint(2, 7, (1,), generator=g)), 6, 2
    D = H * 8
    torch.manual_seed(seed)
    theirs = _torch_stack("decoder", 2, D, H, 48, norm_first, final_norm).eval()
    _randomise_norms(theirs)
    ours = Decoder.from_torch(theirs).eval()
    x, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    tgt_len = torch.randint(1, T + 1, (B,), generator=g)
    src_len = torch.randint(1, S + 1, (B,), generator=g)
    tgt_kpm = torch.arange(T)[None, :] >= tgt_len[:, None]
    mem_kpm = torch.arange(S)[None, :] >= src_len[:, None]
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)  # True = blocked
    expected = theirs(
        x, memory, tgt_mask=causal, tgt_key_padding_mask=tgt_kpm,
        memory_key_padding_mask=mem_kpm,
    )  # fmt: skip
    tgt_mask = combine_masks(from_torch_mask(causal), key_padding_from_torch(tgt_kpm))
    got = ours(x, memory, tgt_mask, key_padding_from_torch(mem_kpm))
    assert (got - expected).abs().max() <= 1e-5


def _tiny(**kw):
    args = dict(n_layers=2, d_model=32, n_heads=4, d_ff=64, dropout=0.0)
    args.update(kw)
    return make_model(13, 17, **args)


def test_forward_shapes_and_logits():
    torch.manual_seed(0)
    model = _tiny()
    src, tgt = torch.randint(1, 13, (3, 7)), torch.randint(1, 17, (3, 5))
    assert model(src, tgt).shape == (3, 5, 17)


@pytest.mark.parametrize("norm_first", [False, True])
def test_changing_a_later_target_token_never_changes_earlier_logits(norm_first):
    torch.manual_seed(0)
    model = _tiny(norm_first=norm_first).eval()
    src, tgt = torch.randint(1, 13, (2, 6)), torch.randint(1, 17, (2, 8))
    base = model(src, tgt)
    for t in range(8):
        changed = tgt.clone()
        changed[:, t] = (changed[:, t] % 16) + 1
        out = model(src, changed)
        torch.testing.assert_close(out[:, :t], base[:, :t], atol=1e-6, rtol=0)
        assert not torch.allclose(out[:, t:], base[:, t:])


def test_source_padding_does_not_change_the_output():
    torch.manual_seed(0)
    model = _tiny().eval()
    src, tgt = torch.randint(1, 13, (1, 5)), torch.randint(1, 17, (1, 4))
    padded = F.pad(src, (0, 3), value=0)
    torch.testing.assert_close(
        model(padded, tgt), model(src, tgt), atol=1e-5, rtol=1e-5
    )


def test_attention_weights_of_every_layer_and_head():
    torch.manual_seed(0)
    model = _tiny().eval()
    src, tgt = torch.tensor([[4, 5, 6, 0]]), torch.tensor([[1, 7, 8]])
    with pytest.raises(RuntimeError, match="record_attention"):
        model(src, tgt)
        model.attention_weights()
    plain = model(src, tgt)
    assert not model.recording_attention
    model.record_attention(True)
    assert model.recording_attention
    torch.testing.assert_close(model(src, tgt), plain)
    w = model.attention_weights()
    assert [len(w[k]) for k in ("encoder_self", "decoder_self", "cross")] == [2, 2, 2]
    assert w["encoder_self"][0].shape == (1, 4, 4, 4)
    assert w["decoder_self"][1].shape == (1, 4, 3, 3)
    assert w["cross"][0].shape == (1, 4, 3, 4)
    assert torch.all(w["cross"][1][..., 3] == 0)  # the PAD source token is never seen
    assert torch.all(w["decoder_self"][0].triu(1) == 0)  # no look-ahead
    model.record_attention(False)
    assert not model.recording_attention
    assert all(m.attn_weights is None for m in model.attention_modules()["cross"])


def test_weight_tying_shares_one_tensor():
    model = make_model(20, 20, n_layers=1, d_model=16, n_heads=2, d_ff=32,
                       share_embeddings=True, tie_generator=True)  # fmt: skip
    assert model.src_embed is model.tgt_embed
    assert model.generator.proj.weight is model.tgt_embed.weight
    untied = make_model(20, 20, n_layers=1, d_model=16, n_heads=2, d_ff=32)
    assert count_parameters(untied) - count_parameters(model) == 2 * 20 * 16
    assert (
        torch.count_nonzero(model.src_embed.weight[0]) == 0
    )  # PAD row zero after init


def test_xavier_init_bounds():
    model = _tiny()
    w = model.encoder.layers[0].ffn.linear1.weight  # (64, 32)
    bound = (6 / (32 + 64)) ** 0.5
    assert w.abs().max() <= bound and w.abs().max() > 0.9 * bound


def test_learned_and_no_positional_encoding_variants():
    torch.manual_seed(0)
    src, tgt = torch.randint(1, 13, (2, 5)), torch.randint(1, 17, (2, 4))
    for positional in ("learned", "none"):
        assert _tiny(positional=positional)(src, tgt).shape == (2, 4, 17)
    # without positions, permuting the source permutes the encoder output the same way
    model = _tiny(positional="none").eval()
    perm = torch.tensor([3, 1, 4, 0, 2])
    mem, _ = model.encode(src)
    mem_perm, _ = model.encode(src[:, perm])
    torch.testing.assert_close(mem_perm, mem[:, perm], atol=1e-5, rtol=1e-5)


def test_bad_inputs_give_clear_errors():
    model = _tiny(max_len=10)
    with pytest.raises(ValueError, match=r"src contains token id 13 .*vocab_size=13"):
        model(torch.tensor([[1, 13]]), torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match=r"tgt contains token id 17 .*vocab_size=17"):
        model(torch.tensor([[1, 2]]), torch.tensor([[1, 17]]))
    with pytest.raises(ValueError, match="sequence length 11 exceeds .*max_len=10"):
        model(torch.ones(1, 11, dtype=torch.long), torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match="src is an empty batch"):
        model(torch.ones(0, 3, dtype=torch.long), torch.ones(0, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="src has length 0"):
        model(torch.ones(2, 0, dtype=torch.long), torch.ones(2, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="batch size 2 but tgt has 3"):
        model(torch.ones(2, 3, dtype=torch.long), torch.ones(3, 2, dtype=torch.long))


def test_a_tiny_copy_task_is_overfit():
    torch.manual_seed(0)
    model = make_model(12, 12, n_layers=2, d_model=64, n_heads=4, d_ff=128, dropout=0.0)
    src = torch.randint(3, 12, (32, 6))
    tgt_in = torch.cat([torch.ones(32, 1, dtype=torch.long), src], 1)  # BOS = 1
    tgt_out = torch.cat([src, torch.full((32, 1), 2)], 1)  # EOS = 2
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _step in range(300):
        loss = F.cross_entropy(model(src, tgt_in).flatten(0, 1), tgt_out.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        if loss.item() < 0.05:
            break
    assert loss.item() < 0.05, (
        f"copy task loss {loss.item():.3f} after {_step + 1} steps"
    )
