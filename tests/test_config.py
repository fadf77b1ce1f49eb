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
