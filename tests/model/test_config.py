import pytest

from transformer_edu import TransformerConfig


def test_defaults_are_the_paper_base_model():
    c = TransformerConfig(100, 100)
    assert (c.d_model, c.n_heads, c.d_ff, c.n_encoder_layers, c.dropout) == (
        512, 8, 2048, 6, 0.1,
    )  # fmt: skip
    assert c.d_k == 64 and not c.norm_first and not c.use_final_norm


def test_round_trip_dict():
    c = TransformerConfig(10, 12, d_model=32, n_heads=4, norm_first=True)
    assert TransformerConfig.from_dict(c.to_dict()) == c
    assert c.use_final_norm
    with pytest.raises(ValueError, match="unknown TransformerConfig fields"):
        TransformerConfig.from_dict({**c.to_dict(), "n_layers": 3})


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(d_model=100, n_heads=8), "d_model=100 is not divisible by n_heads=8"),
        (dict(positional="rotary"), "positional='rotary'"),
        (dict(dropout=1.0), "dropout=1.0"),
        (dict(attention_dropout=-0.1), "attention_dropout=-0.1"),
        (dict(activation_dropout=1.5), "activation_dropout=1.5"),
        (dict(d_model=0), "d_model=0"),
        (dict(share_embeddings=True), "src_vocab_size=10 != tgt_vocab_size=12"),
    ],
)
def test_bad_config_is_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig(10, 12, **kwargs)


def test_from_dict_reads_checkpoints_written_before_the_rename():
    old = {"src_vocab_size": 9, "tgt_vocab_size": 9, "fast_attention": False}
    assert TransformerConfig.from_dict({**old, "fused_qkv": False}).fast is False
    with pytest.raises(ValueError, match="fused_qkv"):
        TransformerConfig.from_dict({**old, "fused_qkv": True})


def test_attention_and_activation_dropout_default_to_dropout():
    from torch import nn

    from transformer_edu import MultiHeadAttention, make_model

    def rates(model):
        attn = {m.dropout for m in model.modules() if isinstance(m, MultiHeadAttention)}
        ffn = {m.dropout.p for n, m in model.named_modules() if n.endswith(".ffn")}
        out = {m.p for n, m in model.named_modules()
               if isinstance(m, nn.Dropout) and not n.endswith("ffn.dropout")}  # fmt: skip
        return attn, ffn, out

    same = make_model(9, 9, n_layers=1, d_model=16, n_heads=2, d_ff=32, dropout=0.2)
    assert rates(same) == ({0.2}, {0.2}, {0.2})  # nn.Transformer's places
    apart = make_model(9, 9, n_layers=1, d_model=16, n_heads=2, d_ff=32, dropout=0.2,
                       attention_dropout=0.05, activation_dropout=0.0)  # fmt: skip
    assert rates(apart) == ({0.05}, {0.0}, {0.2})
    old = same.config.to_dict()  # a checkpoint written before the two fields
    del old["attention_dropout"], old["activation_dropout"]
    assert TransformerConfig.from_dict(old) == same.config
