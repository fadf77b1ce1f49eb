import pytest
import torch

from transformer_edu import (
    DecoderOnlyTranslator,
    EncoderLayer,
    TransformerConfig,
    count_parameters,
    make_decoder_only,
    make_model,
)
from transformer_edu.decoding import beam_search, greedy_decode
from transformer_edu.toy.data import Vocab, build_vocabs, load_corpus
from transformer_edu.toy.training import TrainConfig, train

SIZES = dict(d_model=16, n_heads=4, d_ff=32, dropout=0.0, max_len=40)


def _model(prefix=False, **kw):
    torch.manual_seed(0)
    model = make_decoder_only(20, 21, 2, prefix=prefix, **{**SIZES, **kw}).eval()
    with torch.no_grad():
        model.generator.proj.bias[Vocab.PAD] = -1e4  # never write PAD
    return model


def _batch():
    src = torch.randint(4, 20, (3, 6), generator=torch.Generator().manual_seed(1))
    src[1, 4:], src[2, 2:] = 0, 0  # two padded rows
    tgt = torch.randint(4, 21, (3, 5), generator=torch.Generator().manual_seed(2))
    tgt[:, 0] = Vocab.BOS
    return src, tgt


@pytest.mark.parametrize("prefix", [False, True])
@pytest.mark.parametrize("kw", [{}, dict(positional="learned"), dict(n_kv_heads=2)])
def test_incremental_decoding_and_padding_change_nothing(prefix, kw):
    model = _model(prefix, **kw)
    src, tgt = _batch()
    full = model(src, tgt)  # (B, T, V)
    memory, src_mask = model.encode(src)
    cache, steps = model.decoder.new_cache(), []
    for t in range(tgt.size(1)):
        out = model.decode(tgt[:, t : t + 1], memory, src_mask, cache, offset=t)
        steps.append(model.generator(out))
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    alone = model(src[2:, :2], tgt[2:])  # row 2 without its padding
    torch.testing.assert_close(alone[0], full[2], atol=1e-5, rtol=1e-5)
    cached = greedy_decode(model, src, max_len=6)
    assert cached.tokens == greedy_decode(model, src, max_len=6, use_cache=False).tokens
    assert beam_search(model, src[:1], 3, max_len=5)


def test_the_mask_decides_what_the_source_sees():
    src, tgt = _batch()
    for prefix in (False, True):
        model = _model(prefix)
        other = src.clone()
        other[0, 3] = 5 if src[0, 3] != 5 else 6  # a later source word changes
        # memory (B, S, L·2·H·Dh): row 0, every source position's keys and values
        memory = model.encode(src)[0][0]  # (S, L·2·H·Dh)
        changed = model.encode(other)[0][0]
        earlier_moved = not torch.allclose(memory[:3], changed[:3])
        assert earlier_moved == prefix  # both ways in a prefix LM, causal in a GPT
        torch.testing.assert_close(
            model(src, tgt)[1:], model(other, tgt)[1:]
        )  # other rows do not care


def test_same_parameters_as_the_encoder_decoder_when_the_ffn_is_wider():
    d, d_ff = 16, 32
    enc_dec = make_model(20, 21, n_layers=1, d_model=d, n_heads=4, d_ff=d_ff)
    dec_only = make_decoder_only(20, 21, 2, d_model=d, n_heads=4, d_ff=d_ff + d)
    # two self-attention layers with a d_model wider FFN = an encoder layer and a
    # decoder layer (cross-attention is 4 D² + 4 D + 2 D): equal up to biases
    gap = count_parameters(enc_dec) - count_parameters(dec_only)
    assert abs(gap) / count_parameters(enc_dec) < 0.01
    assert isinstance(dec_only.decoder.layers[0], EncoderLayer)  # a GPT block


def test_the_packages_training_loop_and_exact_match_run_it():
    pairs = [p for p in load_corpus("train") if len(p.src) <= 6][:96]
    sv, tv = build_vocabs(load_corpus("train"))
    torch.manual_seed(0)
    model = make_decoder_only(len(sv), len(tv), 2, **SIZES)
    cfg = TrainConfig(epochs=3, batch_size=32, warmup=5, device="cpu")
    hist = train(model, pairs, sv, tv, cfg, progress=False)
    assert hist.epoch_loss[-1] < hist.epoch_loss[0]
    assert 0 <= hist.train_exact[-1] <= 1  # greedy_decode ran on it


def test_bad_configs_are_named():
    with pytest.raises(ValueError, match="n_encoder_layers=1"):
        DecoderOnlyTranslator(
            TransformerConfig(10, 10, n_encoder_layers=1, d_model=8, n_heads=2)
        )
    with pytest.raises(ValueError, match="positional='rope'"):
        make_decoder_only(10, 10, 1, d_model=8, n_heads=2, positional="rope")
